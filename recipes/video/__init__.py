"""Video: clips of a folder per class or of a manifest, one augmentation per clip, batches of [B, T, 3, H, W].

    from recipes.video import VideoFolderDataset, train_transform, video_loader

    dataset = VideoFolderDataset("ucf101/train", frames_per_clip=16, transform=train_transform(112))
    loader = video_loader(dataset, batch_size=32, device="cuda", seed=0)
    for batch in DevicePrefetcher(loader, "cuda"):   # video float [B, T, 3, 112, 112], label, index, clip, frames
        ...

Decoding goes through TorchCodec's public ``VideoDecoder`` only: each file's frame count and rate
are read once, from its packets, when the dataset is built (:mod:`recipes.video.index`), and each
item decodes only its clip's frames, with decoders kept open per process
(:mod:`recipes.video.decoding`). Each file imports only ``recipes.core`` and this folder, so the
folder can be copied into a project that has ``recipes`` installed.
"""

from recipes.video.collate import LAYOUTS, ClipBatch, VideoCollate, stack_clips, video_collate
from recipes.video.decoding import MAX_CLIP_BYTES, VideoOptions, decode_clip
from recipes.video.device import EncodedClip
from recipes.video.folder import VIDEO_EXTENSIONS, VideoFolderDataset
from recipes.video.loader import video_loader
from recipes.video.manifest import KINETICS_FULL, KINETICS_TRIMMED, VideoDataset
from recipes.video.prepare_videos import prepare
from recipes.video.probe import MAX_FRAME_PIXELS, MAX_FRAMES, VideoInfo, probe
from recipes.video.sampling import SHORT_CHOICES, ClipSampling
from recipes.video.transforms import eval_transform, train_transform

__all__ = [
    "KINETICS_FULL",
    "KINETICS_TRIMMED",
    "LAYOUTS",
    "MAX_CLIP_BYTES",
    "MAX_FRAMES",
    "MAX_FRAME_PIXELS",
    "SHORT_CHOICES",
    "VIDEO_EXTENSIONS",
    "ClipBatch",
    "ClipSampling",
    "EncodedClip",
    "VideoCollate",
    "VideoDataset",
    "VideoFolderDataset",
    "VideoInfo",
    "VideoOptions",
    "decode_clip",
    "eval_transform",
    "prepare",
    "probe",
    "stack_clips",
    "train_transform",
    "video_collate",
    "video_loader",
]
