/* Weak fallbacks for subcommands not yet implemented: each real
 * implementation (a strong symbol in its own file) replaces its line. */
#include "commands.h"
#include "bench.h"
#include "tensafe/status.h"

#define NOT_YET(fn) __attribute__((weak)) int fn(int argc, char **argv) { (void)argc; (void)argv; return tool_fail(#fn, TSAFE_E_UNSUPPORTED); }
NOT_YET(cmd_demo)
NOT_YET(cmd_keygen)
NOT_YET(cmd_encrypt)
NOT_YET(cmd_decrypt)
NOT_YET(cmd_serve)
NOT_YET(cmd_client)
NOT_YET(cmd_adapter)
NOT_YET(cmd_params)
NOT_YET(cmd_lora)
__attribute__((weak)) int bench_core(bench_report *r, int quick) { (void)r; (void)quick; return 0; }
__attribute__((weak)) int bench_lora(bench_report *r, int quick) { (void)r; (void)quick; return 0; }
__attribute__((weak)) int bench_moe(bench_report *r, int quick) { (void)r; (void)quick; return 0; }
