/* Umbrella header: the portable TenSafe-HE API (core, LoRA, MoE).
 * The CUDA entry points are in tensafe/cuda.h; backend authors include
 * tensafe/backend_impl.h. */
#ifndef TENSAFE_TENSAFE_H
#define TENSAFE_TENSAFE_H

#include "tensafe/version.h"
#include "tensafe/status.h"
#include "tensafe/ckks.h"
#include "tensafe/backend.h"

#endif
