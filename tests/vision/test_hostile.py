"""ImageFolderDataset on hostile files: 16-bit PNGs decode, errors from workers name the file,
and a bomb is refused before its pixels are allocated.

(test_folder.py covers each bad file under raise, and the skip policy's exact good batches.)"""

import shutil

import numpy as np
import pytest
import torch

from recipes.vision import ImageFolderDataset, eval_transform, vision_loader
from tests.core.hostile import BAD_IMAGES, peak_rss_growth_mb, sixteen_bit_rgb, top_byte_chw, worker_error, write_png16


def test_sixteen_bit_pngs_decode_to_their_top_byte_not_an_error(tmp_path):
    picture = sixteen_bit_rgb()
    write_png16((tmp_path / "deep").mkdir() or tmp_path / "deep" / "rgb16.png", picture)
    write_png16(tmp_path / "deep" / "gray16.png", picture[:, :, 1])
    dataset = ImageFolderDataset(tmp_path)
    images = {path.rsplit("/", 1)[-1]: dataset[i][0] for i, (path, _) in enumerate(dataset.samples)}
    assert images["rgb16.png"].dtype == torch.uint8
    assert np.array_equal(images["rgb16.png"].numpy(), top_byte_chw(picture))
    assert np.array_equal(images["gray16.png"].numpy(), top_byte_chw(picture[:, :, 1]))


@pytest.fixture()
def one_bad_among_good(fixtures, tmp_path):
    """good/: 5 fixture photos; zz_bad/: a truncated JPEG, which sorts after them."""
    (tmp_path / "good").mkdir()
    for k, name in enumerate(["bird/rgb.jpg", "cat/rgb.jpg", "dog/rgb.jpg", "dog/rgb.png", "bird/gray.png"]):
        shutil.copy(fixtures / "vision" / name, tmp_path / "good" / f"{k}{name[-4:]}")
    (tmp_path / "zz_bad").mkdir()
    shutil.copy(fixtures / "hostile" / "images" / "truncated.jpg", tmp_path / "zz_bad" / "truncated.jpg")
    return tmp_path


def test_an_error_in_a_worker_names_the_file_in_the_main_process(one_bad_among_good):
    dataset = ImageFolderDataset(one_bad_among_good, eval_transform(16, 16))
    loader = vision_loader(dataset, 2, train=False, device="cpu", num_workers=2)
    message = worker_error(loader, r"zz_bad[/\\]truncated\.jpg: cannot decode")
    assert "DataLoader worker process" in message  # it did come from a worker


def test_a_bomb_is_refused_by_the_dataset_before_its_pixels_are_allocated(fixtures, tmp_path):
    (tmp_path / "bad").mkdir()
    shutil.copy(fixtures / "hostile" / "images" / "bomb.png", tmp_path / "bad" / "bomb.png")
    setup = (
        "from recipes.core.contracts.errors import DataError\n"
        "from recipes.vision import ImageFolderDataset\n"
        f"dataset = ImageFolderDataset({str(tmp_path)!r})"
    )
    action = "try:\n    dataset[0]\nexcept DataError as error:\n    print('refused:', error)"
    growth, out = peak_rss_growth_mb(setup, action)
    assert f"bomb.png: refused as a {BAD_IMAGES['bomb.png']}" in out
    assert growth < 32  # decoding the 16000x16000 header's image would take 256-768 MB
