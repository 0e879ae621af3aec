/* What each sampler kind is called and which family it belongs to: the
 * facts about a kind that both the sampler (sampler.c) and the frameworks'
 * samplers (sampler_framework.c) need, in one file below both.  The
 * sampler dispatches to the frameworks' samplers and they name their kind
 * in their messages; with the names and the family here, calls between the
 * two go one way only (sampler.c -> sampler_framework.c -> here).
 *
 * The names are the ones sampler= takes (options.c parses them, with
 * lightning as a second name of torch-ddp) and the ones the identification,
 * the adoption of a learnt order and clairfs-bench print. */
#include "clairfs/sampler.h"
#include "sampler_i.h"

const char *cfs_sampler_kind_name(enum cfs_sampler_kind kind)
{
    switch (kind) {
    case CFS_SAMPLER_TORCH_DDP: return "torch-ddp";
    case CFS_SAMPLER_TORCH: return "torch";
    case CFS_SAMPLER_TORCH_SAMPLER: return "torch-sampler";
    case CFS_SAMPLER_LIST: return "list";
    case CFS_SAMPLER_HF_ACCELERATE: return "hf-accelerate";
    case CFS_SAMPLER_TORCHVISION_RA: return "torchvision-ra";
    case CFS_SAMPLER_TIMM_RA: return "timm-ra";
    case CFS_SAMPLER_TORCH_GLOBAL: return "torch-global";
    }
    return "?";
}

bool cfs_framework_kind(enum cfs_sampler_kind kind)
{
    return kind == CFS_SAMPLER_HF_ACCELERATE || kind == CFS_SAMPLER_TORCHVISION_RA ||
           kind == CFS_SAMPLER_TIMM_RA;
}
