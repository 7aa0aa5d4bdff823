"""Image datasets as uint8 tensors: CIFAR-10, Fashion-MNIST and long-tailed subsets.

Every loader returns ``(images [N, C, H, W] uint8, labels [N] int64)``; augmentation and
normalisation happen later, batched, on the training device (:mod:`.augment`).

Where the files are looked for (the data root is ``$CL_PLUGINS_DATA``, see
:mod:`cl_plugins.integrations.data.paths`):

* CIFAR-10: the canonical python batches ``<root>/images/cifar-10-batches-py/{data_batch_1..5,
  test_batch}`` (what ``torchvision.datasets.CIFAR10`` downloads), else the JPEG ImageFolder
  archives ``<root>/images/cifar10-jpg/{train,test}.tar.gz`` (``<split>/<class>/NNNN.jpg``).
  JPEGs are decoded once into ``$CL_PLUGINS_CACHE/vision``.
* Fashion-MNIST: the canonical IDX files (``train-images-idx3-ubyte[.gz]`` ...) in
  ``<root>/images/FashionMNIST/raw`` (torchvision's layout), ``<root>/images/fashion-mnist`` or
  ``/usr/share/datasets/fashion-mnist`` (Debian's ``dataset-fashion-mnist``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cl_plugins.integrations.data import allow_list
from cl_plugins.integrations.data.paths import ENV, cache_dir, data_root
from cl_plugins.integrations.modalities.images.checksums import CIFAR_MD5
from cl_plugins.integrations.runs import atomic

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
SPLITS = ("train", "test")
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")


#: the globals a CIFAR-10 batch names (a dict of bytes, lists, ints and one uint8 array)
BATCH_GLOBALS = dict.fromkeys([("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                               ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")])  # fmt: skip


def _read_batch(path: Path, md5: str | None) -> dict[bytes, Any]:
    """One batch file: its MD5 checked first (when the published one is known), then the restricted unpickler."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such CIFAR-10 batch; download CIFAR-10 again (cl-plugins data download "
                                "cifar10)")  # fmt: skip
    if md5 is not None:
        with path.open("rb") as f:
            found = hashlib.file_digest(f, "md5").hexdigest()
        if found != md5:
            raise ValueError(f"{path} is not CIFAR-10's published {path.name} (MD5 {found}, expected {md5}): a "
                             "damaged or replaced file, never unpickled; download CIFAR-10 again (cl-plugins data "
                             "download cifar10)")  # fmt: skip
    try:
        batch = allow_list.load(path, BATCH_GLOBALS, "a CIFAR-10 batch never holds", encoding="bytes")
        data, labels = batch[b"data"], batch[b"labels"]
    except Exception as exc:  # a refused class, a truncated file (EOFError), anything but the format's dict
        raise ValueError(f"{path} is not a readable CIFAR-10 batch ({type(exc).__name__}: {atomic.first_line(exc)})"
                         "; download CIFAR-10 again (cl-plugins data download cifar10)") from None  # fmt: skip
    return {b"data": data, b"labels": labels}


def read_cifar10_batches(
    folder: str | Path, split: str, checksums: Mapping[str, str] | None = CIFAR_MD5
) -> tuple[torch.Tensor, torch.Tensor]:
    """The canonical ``cifar-10-batches-py`` pickles: rows of 3072 bytes, channel-major.

    Each file is checked against ``checksums`` (default: the published MD5s; None: not checked, for files of one's
    own in the format) before it is read, and read by an unpickler that admits only the format's types."""
    _check_split(split)
    names = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
    images, labels = [], []
    for name in names:
        batch = _read_batch(Path(folder) / name, None if checksums is None else checksums.get(name))
        images.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        labels.extend(batch[b"labels"])
    return torch.from_numpy(np.concatenate(images)), torch.tensor(labels, dtype=torch.long)


def read_image_folder_tar(archive: str | Path, classes: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """An ImageFolder tree packed as ``.tar.gz`` (``<split>/<class>/<file>.jpg``), decoded with Pillow."""
    from PIL import Image

    index = {name: i for i, name in enumerate(classes)}
    found: list[tuple[str, np.ndarray, int]] = []
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                parts = Path(member.name).parts
                if not member.isfile() or len(parts) < 2 or parts[-2] not in index:
                    continue
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                with Image.open(io.BytesIO(data)) as img:
                    pixels = np.asarray(img.convert("RGB"), dtype=np.uint8)
                found.append((member.name, pixels, index[parts[-2]]))
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:  # cut short, garbled, an image that is not one
        raise ValueError(f"{archive} is not a readable image archive ({type(exc).__name__}: {atomic.first_line(exc)})"
                         "; was it cut short while being copied? Fetch it again") from None  # fmt: skip
    if not found:
        raise ValueError(f"{archive} holds no images in folders named after the classes {classes}")
    found.sort(key=lambda item: item[0])
    images = torch.from_numpy(np.stack([p for _, p, _ in found])).permute(0, 3, 1, 2).contiguous()
    return images, torch.tensor([y for _, _, y in found], dtype=torch.long)


def _cifar_base() -> Path:
    """The data root's ``images`` folder that holds CIFAR-10 (downloading the registry's ``cifar10`` if none)."""
    from cl_plugins.integrations.data import catalogue

    found = (catalogue.find("images/cifar-10-batches-py") or catalogue.find("images/cifar10-jpg")
             or catalogue.ensure("images/cifar-10-batches-py"))  # fmt: skip
    return found.parent if found is not None else data_root() / "images"


def load_cifar10(split: str = "train", root: str | Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """CIFAR-10 ``split`` as ``(uint8 [N, 3, 32, 32], labels [N])`` from the data root (see module doc)."""
    _check_split(split)
    base = Path(root).expanduser() if root is not None else _cifar_base()
    batches = base / "cifar-10-batches-py"
    if batches.is_dir():
        return read_cifar10_batches(batches, split)
    archive = base / "cifar10-jpg" / f"{split}.tar.gz"
    if not archive.is_file():
        raise FileNotFoundError(
            f"CIFAR-10 was not found: neither {batches} (the python batches from "
            f"https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz) nor {archive}. Set {ENV} to the data root "
            "that holds images/cifar-10-batches-py or images/cifar10-jpg"
        )
    stat = archive.stat()
    cached = cache_dir("vision") / f"cifar10-jpg-{split}-{stat.st_size}.pt"
    saved = atomic.load_cache(cached)
    if saved is not None:
        return saved["images"], saved["labels"]
    images, labels = read_image_folder_tar(archive, CIFAR10_CLASSES)
    atomic.torch_save({"images": images, "labels": labels}, cached)
    return images, labels


def read_idx(path: str | Path) -> np.ndarray:
    """An IDX file (MNIST format, optionally gzipped) as a uint8 array of its stated shape."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte IDX file (magic {raw[:4].hex()})")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def _find_idx(folder: Path, stem: str) -> Path | None:
    for name in (stem, f"{stem}.gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def load_fashion_mnist(split: str = "train", root: str | Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Fashion-MNIST ``split`` as ``(uint8 [N, 1, 28, 28], labels [N])`` (see module doc for the folders)."""
    _check_split(split)
    prefix = "train" if split == "train" else "t10k"
    base = Path(root).expanduser() if root is not None else data_root() / "images"
    folders = [base / "FashionMNIST" / "raw", base / "fashion-mnist", base, DEBIAN_FASHION_MNIST]
    if root is None and not any(_find_idx(f, f"{prefix}-images-idx3-ubyte") for f in folders):
        from cl_plugins.integrations.data import catalogue

        downloaded = catalogue.ensure("images/FashionMNIST/raw")
        folders += [downloaded] if downloaded is not None else []
    for folder in folders:
        images = _find_idx(folder, f"{prefix}-images-idx3-ubyte")
        labels = _find_idx(folder, f"{prefix}-labels-idx1-ubyte")
        if images is not None and labels is not None:
            x = torch.from_numpy(read_idx(images).copy()).unsqueeze(1)
            y = torch.from_numpy(read_idx(labels).astype(np.int64))
            if x.shape[0] != y.shape[0]:
                raise ValueError(f"{images} has {x.shape[0]} images but {labels} has {y.shape[0]} labels")
            return x, y
    raise FileNotFoundError(
        f"Fashion-MNIST IDX files ({prefix}-images-idx3-ubyte[.gz]) were not found in any of "
        f"{[str(f) for f in folders]}. Install Debian's dataset-fashion-mnist or set {ENV} to a data root "
        "with images/FashionMNIST/raw"
    )


def long_tail_counts(num_per_class: int, num_classes: int, imbalance_ratio: float) -> list[int]:
    """Exponential profile n_c = n_max · ρ^(−c/(C−1)) (Cao et al. 2019; Kukleva et al. 2023; DySTreSS)."""
    if imbalance_ratio < 1:
        raise ValueError(f"imbalance_ratio must be >= 1 (n_max / n_min), got {imbalance_ratio}")
    if num_classes < 2:
        return [num_per_class] * num_classes
    return [int(num_per_class * imbalance_ratio ** (-c / (num_classes - 1))) for c in range(num_classes)]


def long_tail_indices(labels: torch.Tensor, imbalance_ratio: float = 100.0, seed: int = 0) -> torch.Tensor:
    """Indices of a long-tailed subset: class c keeps n_max · ρ^(−c/(C−1)) random images (class 0 the most).

    ``imbalance_ratio`` ρ = n_max / n_min (100 for CIFAR10-LT in Kukleva et al. and DySTreSS);
    n_max is the size of the smallest class of ``labels`` (5,000 on CIFAR-10). The draw is fixed
    by ``seed``.
    """
    classes = int(labels.max()) + 1
    per_class = [torch.nonzero(labels == c).flatten() for c in range(classes)]
    counts = long_tail_counts(min(len(p) for p in per_class), classes, imbalance_ratio)
    gen = torch.Generator().manual_seed(seed)
    keep = [idx[torch.randperm(len(idx), generator=gen)[:n]] for idx, n in zip(per_class, counts, strict=True)]
    return torch.sort(torch.cat(keep)).values


def stratified_subset(labels: torch.Tensor, per_class: int, seed: int = 0) -> torch.Tensor:
    """Indices of ``per_class`` random images of every class (CPU-sized runs)."""
    gen = torch.Generator().manual_seed(seed)
    keep = []
    for c in range(int(labels.max()) + 1):
        idx = torch.nonzero(labels == c).flatten()
        keep.append(idx[torch.randperm(len(idx), generator=gen)[:per_class]])
    return torch.sort(torch.cat(keep)).values
