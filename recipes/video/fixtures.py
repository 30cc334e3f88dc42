"""The video fixtures: moving patterns in three classes, in every container the recipe reads, and hostile files.

    write_video(Path("fixtures/video"))      # called by recipes.fixtures.generate

Clips are written by TorchCodec's public ``VideoEncoder`` (H.264 in MP4, VP9 and AV1 in WebM,
MPEG-4 and MJPEG in AVI), one thread each and FFmpeg's ``bitexact`` flag (no random Matroska
UIDs), from frames made with integer arithmetic only: the same FFmpeg build gives the same bytes.
The encoder writes neither a rotation nor a variable frame rate, so both are written into the
MP4's boxes here: the rotated clip gets a 90-degree display matrix in its ``tkhd`` box, the
variable-rate one a new ``stts`` box (its first 20 frames at 50 fps, the rest at 50/3 fps;
``moov`` follows ``mdat``, so no chunk offset moves). The hostile files are cut or patched
byte by byte from good ones. The layout is in ``VIDEO_README``.
"""

from __future__ import annotations

import csv
import io
import json
import struct
from pathlib import Path

import torch

HEIGHT, WIDTH = 48, 64
LAYOUT = "    video/             clips in MP4, WebM, AVI; manifests, Kinetics CSV, bad files; see video/README.md\n"
CLASSES = ("left", "right", "still")  # where the bright square moves
# root-relative path -> (class, frames, fps, codec or None for the container's default, kind)
FOLDER_CLIPS = {
    "left/l0_h264.mp4": ("left", 40, 25, "libx264", "plain"),
    "left/l1_vp9.webm": ("left", 40, 25, "libvpx-vp9", "plain"),
    "left/nested/l2_mpeg4.avi": ("left", 36, 20, "mpeg4", "plain"),
    "right/r0_av1.webm": ("right", 30, 25, "libaom-av1", "plain"),
    "right/r1_mjpeg.avi": ("right", 30, 25, "mjpeg", "plain"),
    "right/r2_vfr.mp4": ("right", 40, 25, "libx264", "vfr"),
    "still/s0_rotated.mp4": ("still", 40, 25, "libx264", "rotated"),
    "still/s1_short.mp4": ("still", 10, 25, "libx264", "plain"),
    "still/S2_UPPER.MP4": ("still", 32, 30, "libx264", "plain"),
}
# Kinetics-style: whole videos named by id, rows cutting segments out of them (seconds)
KINETICS_VIDEOS = {"vid_aaa": ("left", 100), "vid_bbb": ("right", 75), "vid_ccc": ("still", 90)}  # 25 fps
KINETICS_ROWS = (("left", "vid_aaa", 0, 2, "train"), ("left", "vid_aaa", 2, 4, "train"),
                 ("right", "vid_bbb", 1, 3, "train"), ("still", "vid_ccc", 1, 3, "train"))
ENCODE = {"fflags": "+bitexact", "threads": "1", "g": "12"}  # a keyframe every 12 frames
# x264's macroblock tree gives different bytes from run to run on these tiny frames; the quantiser
# bounds keep MPEG-4 and MJPEG files small
CRF = {"libx264": 32, "libvpx-vp9": 40, "libaom-av1": 40}  # small files; the tests compare decodes, not quality
CODEC_OPTIONS = {"libx264": {"x264-params": "mbtree=0"}, "mpeg4": {"qmin": "20", "qmax": "31"},
                 "mjpeg": {"qmin": "20", "qmax": "31"}}


def frames(kind: str, count: int, seed: int) -> torch.Tensor:
    """uint8 [count, 3, 48, 64]: a diagonal grating drifting by frame, a bright 8x8 square moving
    left, right or pulsing in place (``kind``), and a red 6x6 marker in the top-left corner."""
    t = torch.arange(count).view(count, 1, 1, 1)
    y = torch.arange(HEIGHT).view(1, 1, HEIGHT, 1)
    x = torch.arange(WIDTH).view(1, 1, 1, WIDTH)
    channel = torch.tensor([1, 2, 3]).view(1, 3, 1, 1)
    phase = (x * channel + y * (4 - channel) + t * (2 + seed % 3)) % 64
    video = (phase - 32).abs() * 3 + 30  # a triangle wave: smooth ramps keep the files small
    video = video.expand(count, 3, HEIGHT, WIDTH).clone()
    for step in range(count):
        left = {"left": WIDTH - 12 - step, "right": 4 + step, "still": WIDTH // 2 - 4}[kind] % (WIDTH - 8)
        video[step, :, 20:28, left : left + 8] = 200 + (step * 7 % 56 if kind == "still" else 0)
    video[:, 0, :6, :6], video[:, 1:, :6, :6] = 255, 0
    return video.to(torch.uint8)


def encode(video: torch.Tensor, fps: int, suffix: str, codec: str | None, **options: str) -> bytes:
    """``video`` in the container of ``suffix`` (``".mp4"``, ``".webm"``, ``".avi"``)."""
    from torchcodec.encoders import VideoEncoder  # here: recipes.fixtures imports without FFmpeg

    from recipes.video.probe import check_ffmpeg

    options = {**ENCODE, **CODEC_OPTIONS.get(codec or "", {}), **options}
    try:
        data = VideoEncoder(video, frame_rate=fps).to_tensor(suffix.lstrip(".").lower(), codec=codec,
                                                             crf=CRF.get(codec or ""), extra_options=options)
    except RuntimeError as error:
        check_ffmpeg(error)
        raise
    return data.numpy().tobytes()


def write_video(root: Path) -> str:
    """Write ``folder/``, the manifests, ``kinetics/``, ``hostile/`` and README.md in ``root``; returns
    ``LAYOUT``, its lines of fixtures/README.md."""
    for number, (name, (kind, count, fps, codec, special)) in enumerate(FOLDER_CLIPS.items()):
        options = {"bf": "0"} if special == "vfr" else {}  # no reordering: only the times change
        data = encode(frames(kind, count, number), fps, Path(name).suffix, codec, **options)
        data = {"vfr": variable_rate, "rotated": rotated}.get(special, lambda clip: clip)(data)
        _write(root / "folder" / name, data)
    _write(root / "folder/still/notes.txt", b"Not a video: VideoFolderDataset skips other extensions.\n")
    rows = [{"video": f"folder/{name}", "label": CLASSES.index(clip[0])} for name, clip in FOLDER_CLIPS.items()]
    table = io.StringIO()
    writer = csv.DictWriter(table, ["video", "label"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    _write(root / "manifest.csv", table.getvalue().encode())
    segments = [{"video": "folder/left/l0_h264.mp4", "label": "left", "start": 0.2, "end": 1.0},
                {"video": "folder/right/r2_vfr.mp4", "label": "right", "start": 0.3, "end": 1.5},
                {"video": "folder/still/S2_UPPER.MP4", "label": "still", "start": 0.5, "end": 0.9}]
    _write(root / "segments.jsonl", "".join(json.dumps(row, sort_keys=True) + "\n" for row in segments).encode())
    _write_kinetics(root / "kinetics")
    _write_hostile(root / "hostile")
    _write(root / "README.md", VIDEO_README.encode())
    return LAYOUT


def _write_kinetics(root: Path) -> None:
    """Whole videos ``full/<id>.mp4``, the same segments cut ``trimmed/<label>/<id>_<start>_<end>.mp4``, and the CSV."""
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(["label", "youtube_id", "time_start", "time_end", "split"])
    writer.writerows(KINETICS_ROWS)
    _write(root / "train.csv", table.getvalue().encode())
    for number, (video_id, (kind, count)) in enumerate(KINETICS_VIDEOS.items()):
        whole = frames(kind, count, 10 + number)
        _write(root / "full" / f"{video_id}.mp4", encode(whole, 25, ".mp4", "libx264"))
        for label, row_id, start, end, _ in KINETICS_ROWS:
            if row_id == video_id:
                cut = encode(whole[start * 25 : end * 25], 25, ".mp4", "libx264")
                _write(root / "trimmed" / label / f"{video_id}_{start:06d}_{end:06d}.mp4", cut)


def _write_hostile(root: Path) -> None:
    """Each file broken one way (see ``VIDEO_README``)."""
    from torchcodec.encoders import AudioEncoder

    mp4 = encode(frames("left", 20, 0), 25, ".mp4", "libx264")
    mjpeg = encode(frames("right", 9, 1), 25, ".avi", "mjpeg")
    raw = encode(frames("still", 2, 2)[:, :, :16, :16], 5, ".avi", "rawvideo")
    _write(root / "empty.mp4", b"")
    _write(root / "not_a_video.mp4", b"This is text, not a video.\n" * 8)
    samples = (torch.arange(4000) % 40 - 20).float().div(40).unsqueeze(0)  # a sawtooth, integer-made
    _write(root / "sound_only.mp4", AudioEncoder(samples, sample_rate=8000).to_tensor("mp4").numpy().tobytes())
    _write(root / "truncated.mp4", mp4[: len(mp4) // 2])  # moov, at the end, is lost
    _write(root / "truncated.avi", mjpeg[: len(mjpeg) * 2 // 3])  # the header still counts 20 frames
    _write(root / "huge_frames.avi", _patched(raw, b"strf", 12, struct.pack("<ii", 16000, 16000)))
    counts = _patched(mjpeg, b"avih", 24, struct.pack("<I", 2**31 - 1))
    _write(root / "many_frames.avi", _patched(counts, b"strh", 40, struct.pack("<I", 2**31 - 1)))
    unknown = _patched(mjpeg, b"strh", 12, b"ZZZZ")
    _write(root / "unknown_codec.avi", _patched(unknown, b"strf", 24, b"ZZZZ"))


def _patched(data: bytes, tag: bytes, offset: int, value: bytes) -> bytes:
    """``data`` with ``value`` written ``offset`` bytes after the first ``tag``."""
    at = data.index(tag) + offset
    return data[:at] + value + data[at + len(value) :]


def rotated(mp4: bytes) -> bytes:
    """``mp4`` with the display matrix of its first ``tkhd`` box turned by 90 degrees."""
    at = mp4.index(b"tkhd") + 4 + 40  # after the version and flags, times, ids, duration, layer and volume
    return mp4[:at] + struct.pack(">9i", 0, 0x10000, 0, -0x10000, 0, 0, 0, 0, 0x40000000) + mp4[at + 36 :]


def variable_rate(mp4: bytes) -> bytes:
    """``mp4`` (one ``stts`` entry, an even frame count) with its first half of frames twice as
    fast and its second half 2/3 as fast: the same total duration in a new ``stts`` box."""
    at = mp4.index(b"stts") - 4
    size, _, _, entries, count, delta = struct.unpack(">I4sIIII", mp4[at : at + 24])
    if entries != 1 or count % 2 or delta % 2:
        raise ValueError("variable_rate expects a single-rate stts over an even number of frames")
    box = struct.pack(">I4sIIIIII", 32, b"stts", 0, 2, count // 2, delta // 2, count // 2, delta * 3 // 2)
    grown = mp4[:at] + box + mp4[at + size :]
    for parent in (b"moov", b"trak", b"mdia", b"minf", b"stbl"):  # each encloses stts: 8 bytes larger
        start = grown.index(parent) - 4
        size = struct.unpack(">I", grown[start : start + 4])[0]
        grown = grown[:start] + struct.pack(">I", size + 8) + grown[start + 4 :]
    return grown


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


VIDEO_README = """# Video fixtures

Written by `recipes/video/fixtures.py` with TorchCodec's `VideoEncoder`: 64x48 frames of a drifting
grating, a bright square that moves (class `left` or `right`) or pulses in place (`still`), and a red
marker in the top-left corner. A keyframe every 12 frames.

    folder/              VideoFolderDataset layout, classes left, right, still
      left/l0_h264.mp4        H.264 in MP4, 40 frames at 25 fps
      left/l1_vp9.webm        VP9 in WebM, 40 frames at 25 fps
      left/nested/l2_mpeg4.avi  MPEG-4 part 2 in AVI, 36 frames at 20 fps (a nested folder)
      right/r0_av1.webm       AV1 in WebM, 30 frames at 25 fps
      right/r1_mjpeg.avi      MJPEG in AVI, 30 frames at 25 fps
      right/r2_vfr.mp4        H.264, variable frame rate: 20 frames 0.02 s apart, then 20 frames 0.06 s apart
      still/s0_rotated.mp4    H.264 stored 64x48 with a 90-degree display matrix: decodes to 48x64,
                              the red marker top-right
      still/s1_short.mp4      H.264, 10 frames: shorter than a 16-frame clip
      still/S2_UPPER.MP4      H.264, 32 frames at 30 fps, an upper-case extension
      still/notes.txt         not a video (skipped by extension)
    manifest.csv         video,label: the nine clips above, label = class index
    segments.jsonl       {"video", "label" (a class name), "start", "end"}: segments in seconds
    kinetics/
      train.csv          label,youtube_id,time_start,time_end,split: 4 rows, two of them cut from vid_aaa
      full/<id>.mp4      the whole videos (4, 3 and 3.6 s at 25 fps)
      trimmed/<label>/<id>_<start:06d>_<end:06d>.mp4   each row's segment as its own file
    hostile/             each broken one way
      empty.mp4          0 bytes
      not_a_video.mp4    text
      sound_only.mp4     AAC audio in MP4, no video stream
      truncated.mp4      the first half of an MP4: its index (moov) is lost
      truncated.avi      two thirds of an MJPEG AVI: the header counts 9 frames, 6 remain
      huge_frames.avi    raw video whose header claims 16000x16000 frames
      many_frames.avi    MJPEG whose header claims 2,147,483,647 frames
      unknown_codec.avi  MJPEG relabelled with the codec tag ZZZZ, which no decoder reads
"""
