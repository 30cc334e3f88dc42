"""Speech and sound: an audio folder, duration-bucketed batches padded with lengths, the loader preset.

    from recipes.audio import AudioFolderDataset, audio_loader

    dataset = AudioFolderDataset("speech_commands/train", sample_rate=16000, clip_seconds=1.0)
    loader = audio_loader(dataset, batch_size=128, device="cuda", seed=0)
    for batch in DevicePrefetcher(loader, "cuda"):  # {"audio" float32 [B,T], "audio_lengths", ...}
        ...

Decoding goes through TorchCodec's ``AudioDecoder``, and through libsndfile (``soundfile``, the
``audio`` extra) for PCM WAV and FLAC already at the target rate, the same samples bit for bit
(``decoding.py``; :func:`decoders` says which reads what). 16-bit PCM at the target rate crosses
from the workers as its int16 samples, made float by ``DevicePrefetcher``; each file imports only
``recipes.core`` and this folder, so the folder can be copied into a project that has
``recipes`` installed.
"""

from recipes.audio.decoding import MAX_SECONDS, AudioInfo, decode, decoders, probe
from recipes.audio.features import LogMel
from recipes.audio.folder import AUDIO_EXTENSIONS, AudioCollate, AudioFolderDataset, audio_collate, audio_loader
from recipes.audio.prepare_shards import prepare
from recipes.audio.shards import AudioShards
from recipes.audio.speech import SpeechDataset
from recipes.audio.speech_build import ManifestDurationWarning

__all__ = [
    "AudioCollate",
    "AudioShards",
    "AUDIO_EXTENSIONS",
    "MAX_SECONDS",
    "LogMel",
    "ManifestDurationWarning",
    "SpeechDataset",
    "AudioFolderDataset",
    "AudioInfo",
    "audio_collate",
    "audio_loader",
    "decode",
    "decoders",
    "prepare",
    "probe",
]
