/* Symbol export and attribute macros shared by every public header. */
#ifndef TENSAFE_EXPORT_H
#define TENSAFE_EXPORT_H

#if defined(TSAFE_BUILDING_LIBRARY) && defined(__GNUC__)
#define TSAFE_API __attribute__((visibility("default")))
#else
#define TSAFE_API
#endif

/* Calls that can fail: ignoring their status is a bug the compiler flags. */
#if defined(__GNUC__)
#define TSAFE_NODISCARD __attribute__((warn_unused_result))
#else
#define TSAFE_NODISCARD
#endif

#endif
