/* What each sampler kind is called and which family it belongs to: the
 * facts about a kind that both the sampler (sampler.c) and the frameworks'
 * samplers (sampler_framework.c) need, in one file below both.  The
 * sampler dispatches to the frameworks' samplers and they name their kind
 * in their messages; with the names and the family here, calls between the
 * two go one way only (sampler.c -> sampler_framework.c -> here).
 *
 * The names are the ones sampler= takes (options.c parses them, with
 * lightning as a second name of torch-ddp) and the ones the identification,
 * the adoption of a learnt order and clairfs-bench print.
 *
 * The families: the frameworks' samplers (laid out by sampler_framework.c),
 * the kinds that permute once per epoch from seed + epoch and stride the
 * permutation by rank as DistributedSampler does, and the kinds that draw
 * every epoch from one generator kept across the run (sampler.c replays
 * them), some of them seeded by a draw of the global generator. */
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
    case CFS_SAMPLER_DETECTRON2: return "detectron2";
    case CFS_SAMPLER_MMENGINE_NOROUND: return "mmengine-noround";
    case CFS_SAMPLER_TORCHDATA: return "torchdata";
    case CFS_SAMPLER_TORCHDATA_WORKERS: return "torchdata-workers";
    case CFS_SAMPLER_ULTRALYTICS: return "ultralytics";
    case CFS_SAMPLER_ULTRALYTICS_DDP: return "ultralytics-ddp";
    case CFS_SAMPLER_HF_TRAINER_GLOBAL: return "hf-trainer-global";
    }
    return "?";
}

bool cfs_framework_kind(enum cfs_sampler_kind kind)
{
    return kind == CFS_SAMPLER_HF_ACCELERATE || kind == CFS_SAMPLER_TORCHVISION_RA ||
           kind == CFS_SAMPLER_TIMM_RA;
}

bool cfs_ddp_kind(enum cfs_sampler_kind kind)
{
    return kind == CFS_SAMPLER_TORCH_DDP || kind == CFS_SAMPLER_MMENGINE_NOROUND ||
           kind == CFS_SAMPLER_ULTRALYTICS_DDP;
}

bool cfs_stateful_kind(enum cfs_sampler_kind kind)
{
    return kind == CFS_SAMPLER_TORCH || kind == CFS_SAMPLER_TORCH_SAMPLER ||
           kind == CFS_SAMPLER_TORCH_GLOBAL || kind == CFS_SAMPLER_TORCHDATA ||
           kind == CFS_SAMPLER_TORCHDATA_WORKERS || kind == CFS_SAMPLER_ULTRALYTICS ||
           kind == CFS_SAMPLER_HF_TRAINER_GLOBAL;
}

bool cfs_drawn_seed_kind(enum cfs_sampler_kind kind)
{
    return kind == CFS_SAMPLER_TORCHDATA || kind == CFS_SAMPLER_TORCHDATA_WORKERS ||
           kind == CFS_SAMPLER_HF_TRAINER_GLOBAL;
}
