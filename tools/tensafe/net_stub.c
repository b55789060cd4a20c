/* Placeholder until the HELLO v3 client lands in cmd_net.c (next commit). */
#include "net_remote.h"
tsafe_status net_remote_open(uint32_t port, double timeout, io_mode mode, tsafe_dp_session *dp,
                             int no_dp, net_remote **out, char *what, size_t cap){return TSAFE_E_UNSUPPORTED;}
void net_remote_close(net_remote *r){}
size_t net_remote_count(const net_remote *r){return 0;}
const char *net_remote_module(const net_remote *r, size_t i, uint32_t *d_in, uint32_t *rank,
                              uint32_t *d_out){return 0;}
tsafe_status net_remote_delta(net_remote *r, const uint32_t *mods, size_t n, const float *x,
                              float *const *delta, tsafe_lora_stats *stats, char *what,
                              size_t cap){return TSAFE_E_UNSUPPORTED;}
