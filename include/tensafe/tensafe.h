/* Umbrella header: the portable TenSafe-HE API (core, LoRA, MoE).
 * The CUDA entry points are in tensafe/cuda.h; backend authors include
 * tensafe/backend_impl.h. */
#ifndef TENSAFE_TENSAFE_H
#define TENSAFE_TENSAFE_H

#include "tensafe/version.h"
#include "tensafe/status.h"
#include "tensafe/ckks.h"
#include "tensafe/backend.h"
#include "tensafe/ckks_buffer.h"
#include "tensafe/lora_adapter.h"
#include "tensafe/lora_he.h"
#include "tensafe/lora_engine.h"
#include "tensafe/lora_two_party.h"
#include "tensafe/lora_sealed.h"
#include "tensafe/bfv.h"
#include "tensafe/bfv_backend.h"
#include "tensafe/lora_dp.h"
#include "tensafe/lora_svd.h"
#include "tensafe/lora_package.h"
#include "tensafe/lora_registry.h"
#include "tensafe/moe.h"
#include "tensafe/moe_lora.h"

#endif
