"""Unit tests of the vision adapter on tiny tensors: augmentations, ResNets, kNN, probe, frameworks, loaders."""

from __future__ import annotations

import colorsys
import gzip
import io
import math
import pickle
import tarfile

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import cl_plugins as clp
from cl_plugins.integrations.evaluation.knn import knn_accuracy, knn_predict, topk_accuracy
from cl_plugins.integrations.evaluation.linear_probe import linear_probe
from cl_plugins.integrations.hosts.vision.ssl_methods import ContrastiveSSL, build_vision_loss, projection_head
from cl_plugins.integrations.modalities.images import augment as A
from cl_plugins.integrations.modalities.images.datasets import (
    load_cifar10,
    long_tail_counts,
    long_tail_indices,
    read_cifar10_batches,
    read_idx,
    read_image_folder_tar,
    stratified_subset,
)
from cl_plugins.integrations.modalities.images.resnet import build_resnet, load_torchvision_weights, resnet18
from tests.planted import Planted

# ----------------------------------------------------------------------------- augmentations


def _images(b: int = 4, c: int = 3, h: int = 8, w: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.rand(b, c, h, w, generator=torch.Generator().manual_seed(seed))


def test_full_box_crop_is_the_identity_and_flip_mirrors():
    x = _images()
    out = A.random_resized_crop(x, 8, scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=0.0)
    torch.testing.assert_close(out, x, atol=1e-6, rtol=0)
    flipped = A.random_resized_crop(x, 8, scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=1.0)
    torch.testing.assert_close(flipped, x.flip(-1), atol=1e-6, rtol=0)


def test_crop_of_a_quarter_samples_inside_one_quadrant():
    # a 2x2 block image: each quadrant one constant value; a crop of area 1/4 and aspect 1 lies
    # within at most ... the box centre is uniform, so check the output is within the value range
    x = torch.zeros(64, 1, 8, 8)
    x[:, :, :4, :4], x[:, :, :4, 4:], x[:, :, 4:, :4], x[:, :, 4:, 4:] = 0.1, 0.2, 0.3, 0.4
    out = A.random_resized_crop(x, 4, scale=(0.25, 0.25), ratio=(1.0, 1.0))
    assert out.shape == (64, 1, 4, 4)
    assert out.min() >= 0.1 - 1e-6 and out.max() <= 0.4 + 1e-6
    # the box is half the side: its samples span at most two quadrants per axis
    assert (out.amax(dim=(1, 2, 3)) - out.amin(dim=(1, 2, 3)) <= 0.3 + 1e-6).all()


def test_hsv_round_trip_matches_colorsys():
    x = _images(b=2, h=5, w=5)
    hsv = A.rgb_to_hsv(x)
    for b, i, j in [(0, 0, 0), (1, 2, 3), (0, 4, 1)]:
        ref = colorsys.rgb_to_hsv(*x[b, :, i, j].tolist())
        assert hsv[b, :, i, j].tolist() == pytest.approx(ref, abs=1e-5)
    torch.testing.assert_close(A.hsv_to_rgb(hsv), x, atol=1e-5, rtol=0)


def test_colour_adjustments_known_answers():
    red = torch.zeros(1, 3, 2, 2)
    red[:, 0] = 1.0
    cyan = A.adjust_hue(red, torch.tensor([0.5]))
    torch.testing.assert_close(cyan[0, :, 0, 0], torch.tensor([0.0, 1.0, 1.0]), atol=1e-6, rtol=0)
    x = _images()
    torch.testing.assert_close(A.adjust_hue(x, torch.zeros(4)), x, atol=1e-5, rtol=0)
    gray = A.adjust_saturation(x, torch.zeros(4))
    torch.testing.assert_close(gray, A.grayscale(x).expand_as(x))
    flat = A.adjust_contrast(x, torch.zeros(4))
    assert torch.allclose(flat, A.grayscale(x).mean(dim=(1, 2, 3), keepdim=True).expand_as(x))
    torch.testing.assert_close(A.adjust_brightness(x, torch.full((4,), 0.5)), x * 0.5)
    assert A.adjust_brightness(x, torch.full((4,), 10.0)).max() <= 1.0


def test_random_ops_respect_their_probabilities():
    x = _images(b=256)
    torch.testing.assert_close(A.color_jitter(x, p=0.0), x)
    g = A.random_grayscale(x, p=1.0)
    assert torch.allclose(g[:, 0], g[:, 1]) and torch.allclose(g[:, 1], g[:, 2])
    torch.manual_seed(0)
    changed = (A.random_grayscale(x, p=0.2) != x).flatten(1).any(dim=1).float().mean()
    assert 0.1 < float(changed) < 0.3
    torch.testing.assert_close(A.gaussian_blur(x, p=0.0), x)
    torch.testing.assert_close(A.horizontal_flip(x, p=1.0), x.flip(-1))


def test_gaussian_blur_of_a_delta_is_the_separable_kernel():
    x = torch.zeros(1, 1, 9, 9)
    x[0, 0, 4, 4] = 1.0
    sigma = 1.0
    out = A.gaussian_blur(x, p=1.0, sigma=(sigma, sigma), kernel_size=5)
    k = torch.exp(-(torch.arange(-2.0, 3.0) ** 2) / (2 * sigma**2))
    k = k / k.sum()
    torch.testing.assert_close(out[0, 0, 2:7, 2:7], torch.outer(k, k), atol=1e-6, rtol=0)
    const = torch.full((2, 3, 10, 10), 0.3)
    torch.testing.assert_close(A.gaussian_blur(const, p=1.0), const)


def test_ssl_augment_shapes_determinism_and_normalisation():
    images = (torch.rand(8, 3, 32, 32) * 255).to(torch.uint8)
    aug = A.SSLAugment(size=16, blur_p=0.5)
    torch.manual_seed(3)
    a = aug(images)
    torch.manual_seed(3)
    b = aug(images)
    assert a.shape == (8, 3, 16, 16) and a.dtype == torch.float32
    torch.testing.assert_close(a, b)
    one = A.SSLAugment(size=28, mean=(0.5,), std=(0.5,))((torch.rand(4, 1, 28, 28) * 255).to(torch.uint8))
    assert one.shape == (4, 1, 28, 28) and one.min() >= -1 - 1e-6 and one.max() <= 1 + 1e-6
    ev = A.EvalTransform(size=24, resize_to=28)(images)
    assert ev.shape == (8, 3, 24, 24)
    with pytest.raises(ValueError, match="hue"):
        A.color_jitter(a, hue=0.7)


# ----------------------------------------------------------------------------- ResNets


@pytest.mark.parametrize("arch, params", [("resnet18", 11_689_512), ("resnet50", 25_557_032)])
def test_resnet_has_torchvisions_parameter_count(arch, params):
    net = build_resnet(arch, num_classes=1000)
    assert sum(p.numel() for p in net.parameters()) == params


def test_resnet_keys_are_torchvisions_and_weights_load(tmp_path):
    full = resnet18(num_classes=1000)
    keys = set(full.state_dict())
    for key in ("conv1.weight", "bn1.running_mean", "layer1.0.conv2.weight", "layer2.0.downsample.0.weight",
                "layer2.0.downsample.1.num_batches_tracked", "layer4.1.bn2.bias", "fc.weight", "fc.bias"):  # fmt: skip
        assert key in keys
    assert len(keys) == 122  # torchvision resnet18().state_dict() has 122 entries
    torch.save({f"module.{k}": v for k, v in full.state_dict().items()}, tmp_path / "r18.pth")
    features = resnet18()
    load_torchvision_weights(features, tmp_path / "r18.pth")
    torch.testing.assert_close(features.layer3[1].conv1.weight, full.layer3[1].conv1.weight)
    x = torch.randn(2, 3, 64, 64)
    full.eval(), features.eval()
    assert features(x).shape == (2, 512)
    with pytest.raises(ValueError, match="does not match"):
        load_torchvision_weights(build_resnet("resnet34"), tmp_path / "r18.pth")


def test_cifar_stem_keeps_resolution_until_layer2():
    net = resnet18(cifar_stem=True, width=8)
    assert isinstance(net.maxpool, nn.Identity) and net.conv1.kernel_size == (3, 3)
    assert net.feature_dim == 64 and net(torch.randn(2, 3, 32, 32)).shape == (2, 64)
    assert net.layer1(net.relu(net.bn1(net.conv1(torch.randn(1, 3, 32, 32))))).shape[-1] == 32


# ----------------------------------------------------------------------------- kNN and linear probe


def test_knn_known_answer():
    bank = torch.tensor([[1.0, 0.0], [0.0, 1.0], [math.sqrt(0.5), math.sqrt(0.5)]])
    labels = torch.tensor([0, 1, 1])
    query = torch.tensor([[1.0, 0.1]])
    scores = knn_predict(query, bank, labels, num_classes=2, k=2, t=0.1)
    s = F.normalize(query, dim=1) @ F.normalize(bank, dim=1).T  # the two nearest: rows 0 and 2
    expected = torch.tensor([[math.exp(s[0, 0] / 0.1), math.exp(s[0, 2] / 0.1)]])
    torch.testing.assert_close(scores, expected, rtol=1e-5, atol=0)
    # k = 3 adds row 1's vote to class 1 and flips nothing here
    assert knn_predict(query, bank, labels, 2, k=3, t=0.1).argmax().item() == 0
    assert knn_accuracy(query, torch.tensor([0]), bank, labels, 2, k=2) == {"top1": 1.0}


def test_topk_accuracy_known_answer():
    scores = torch.tensor([[0.1, 0.5, 0.4], [0.9, 0.05, 0.05], [0.2, 0.3, 0.5]])
    labels = torch.tensor([2, 0, 0])
    assert topk_accuracy(scores, labels, (1, 2, 3)) == {1: pytest.approx(1 / 3), 2: pytest.approx(2 / 3), 3: 1.0}


def test_linear_probe_separates_separable_features():
    gen = torch.Generator().manual_seed(0)
    centres = torch.randn(4, 16, generator=gen) * 4
    y = torch.arange(400) % 4
    x = centres[y] + torch.randn(400, 16, generator=gen)
    res = linear_probe(x[:300], y[:300], x[300:], y[300:], 4, epochs=20)
    assert res["top1"] > 0.95


# ----------------------------------------------------------------------------- frameworks


def _tiny_ssl(framework: str, loss: str = "infonce", **kw) -> ContrastiveSSL:
    backbone = resnet18(cifar_stem=True, width=4)
    head = projection_head(backbone.feature_dim, 16, 8)
    loss_fn = build_vision_loss(loss, framework, dim=8)
    return ContrastiveSSL(backbone, head, loss_fn, A.SSLAugment(size=16), framework, queue_size=32, **kw)


@pytest.mark.parametrize("framework", ["simclr", "simco", "mocov2", "simmoco"])
@pytest.mark.parametrize("loss", clp.available_losses())
def test_every_framework_trains_with_every_strategy(framework, loss):
    torch.manual_seed(0)
    if (framework, loss) == ("mocov2", "amcl"):
        with pytest.raises(ValueError, match="not 'queue'"):  # AMCL's per-pair MLP has no queue form
            _tiny_ssl(framework, loss)
        return
    model = _tiny_ssl(framework, loss)
    clp.set_epoch_length(model, 10)  # the trainer's part (cosine_schedule's vision preset counts epochs)
    images = (torch.rand(6, 3, 16, 16) * 255).to(torch.uint8)
    value = model((images, torch.zeros(6)))
    assert torch.isfinite(value)
    value.backward()
    grads = [p.grad for p in model.backbone.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_simclr_forward_is_the_strategy_on_two_views():
    model = _tiny_ssl("simclr")
    images = (torch.rand(6, 3, 16, 16) * 255).to(torch.uint8)
    torch.manual_seed(1)
    value = model(images)
    torch.manual_seed(1)
    x1, x2 = model.augment(images), model.augment(images)
    ref = clp.build_loss("infonce", tau=0.1, layout="simclr")(model.project(x1), model.project(x2))
    torch.testing.assert_close(value, ref)


def test_simco_is_symmetric_cross_view_dual_temperature():
    loss_fn = build_vision_loss("dual_temperature", "simco")
    assert loss_fn.layout == "cross_view" and loss_fn.symmetric
    z1, z2 = torch.randn(8, 4), torch.randn(8, 4)
    one_way = clp.build_loss("dual_temperature", tau_alpha=0.1, tau_beta=1.0, layout="cross_view")
    torch.testing.assert_close(loss_fn(z1, z2), (one_way(z1, z2) + one_way(z2, z1)) / 2)


def test_moco_queue_and_momentum_update():
    torch.manual_seed(0)
    model = _tiny_ssl("mocov2")
    before_queue = model.queue.get()
    key_before = model.backbone_m.conv1.weight.clone()
    images = (torch.rand(6, 3, 16, 16) * 255).to(torch.uint8)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss = model(images)
    loss.backward()
    opt.step()
    assert int(model.queue.ptr) == 12  # both directions' keys enqueued
    assert not torch.equal(model.queue.get()[:12], before_queue[:12])
    assert all(not p.requires_grad for p in model.backbone_m.parameters())
    model.momentum_update()
    expected = 0.99 * key_before + 0.01 * model.backbone.conv1.weight.detach()
    torch.testing.assert_close(model.backbone_m.conv1.weight, expected)
    assert "queue.queue" in model.state_dict() and "backbone_m.conv1.weight" in model.state_dict()


def test_framework_rejects_a_loss_in_the_wrong_layout():
    backbone = resnet18(cifar_stem=True, width=4)
    with pytest.raises(ValueError, match="layout='queue'"):
        ContrastiveSSL(backbone, projection_head(32, 8, 8), clp.build_loss("infonce"), A.SSLAugment(), "mocov2")
    with pytest.raises(ValueError, match="framework must be one of"):
        build_vision_loss("infonce", "byol")
    with pytest.raises(ValueError, match="simmoco"):
        ContrastiveSSL(backbone, projection_head(32, 8, 8), build_vision_loss("infonce", "mocov2"), A.SSLAugment(),
                       "mocov2", queue_size=0)  # fmt: skip


# ----------------------------------------------------------------------------- data readers


def test_cifar_python_batches_are_read_channel_major(tmp_path):
    rng = np.random.default_rng(0)
    for name, n in [*[(f"data_batch_{i}", 3) for i in range(1, 6)], ("test_batch", 2)]:
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        with open(tmp_path / name, "wb") as f:
            pickle.dump({b"data": data, b"labels": list(range(n))}, f)
    x, y = read_cifar10_batches(tmp_path, "test", checksums=None)  # files of our own: not the published ones
    raw = pickle.load(open(tmp_path / "test_batch", "rb"))[b"data"]
    assert x.shape == (2, 3, 32, 32) and y.tolist() == [0, 1]
    assert x[1, 2, 0, 5] == raw[1, 2 * 1024 + 5]  # channel-major rows: R plane, G plane, B plane
    assert read_cifar10_batches(tmp_path, "train", checksums=None)[0].shape == (15, 3, 32, 32)
    with pytest.raises(ValueError, match=r"test_batch is not CIFAR-10's published test_batch \(MD5 .*never unpickled"):
        read_cifar10_batches(tmp_path, "test")  # the default: the published checksums


@pytest.mark.parametrize("checksums", [None, {"test_batch": "0" * 32}], ids=["unchecked", "checksummed"])
def test_a_crafted_cifar_batch_never_runs(tmp_path, monkeypatch, checksums):
    """a data_batch planted under CL_PLUGINS_DATA ran its code when unpickled."""
    marker = tmp_path / "pwned"
    with open(tmp_path / "test_batch", "wb") as f:
        pickle.dump({b"data": Planted(marker), b"labels": [0]}, f)
    with pytest.raises(ValueError, match="test_batch") as info:
        read_cifar10_batches(tmp_path, "test", checksums=checksums)
    assert not marker.exists() and "\n" not in str(info.value)
    (tmp_path / "test_batch").write_bytes(b"\x80\x04trunc")
    with pytest.raises(ValueError, match="not a readable CIFAR-10 batch"):
        read_cifar10_batches(tmp_path, "test", checksums=None)
    root = tmp_path / "root" / "images" / "cifar-10-batches-py"
    root.mkdir(parents=True)
    with open(root / "test_batch", "wb") as f:
        pickle.dump({b"data": Planted(marker), b"labels": [0]}, f)
    monkeypatch.setenv("CL_PLUGINS_DATA", str(tmp_path / "root"))
    with pytest.raises(ValueError, match="MD5"):
        load_cifar10("test")
    assert not marker.exists()


def test_image_folder_tar_is_decoded_with_class_indices(tmp_path):
    from PIL import Image

    archive = tmp_path / "test.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for cls, colour in [("bird", (255, 0, 0)), ("airplane", (0, 0, 255))]:
            buf = io.BytesIO()
            Image.new("RGB", (4, 4), colour).save(buf, format="PNG")
            info = tarfile.TarInfo(f"test/{cls}/0000.png")
            info.size = len(buf.getvalue())
            tar.addfile(info, io.BytesIO(buf.getvalue()))
    x, y = read_image_folder_tar(archive, ("airplane", "automobile", "bird"))
    assert y.tolist() == [0, 2] and x.shape == (2, 3, 4, 4)
    assert x[0, :, 0, 0].tolist() == [0, 0, 255] and x[1, :, 0, 0].tolist() == [255, 0, 0]


def test_idx_reader(tmp_path):
    data = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    header = bytes([0, 0, 8, 3]) + b"".join(int(d).to_bytes(4, "big") for d in data.shape)
    with gzip.open(tmp_path / "x-idx3-ubyte.gz", "wb") as f:
        f.write(header + data.tobytes())
    np.testing.assert_array_equal(read_idx(tmp_path / "x-idx3-ubyte.gz"), data)
    (tmp_path / "bad").write_bytes(b"\x00\x00\x0d\x01" + bytes(8))
    with pytest.raises(ValueError, match="IDX"):
        read_idx(tmp_path / "bad")


def test_long_tail_profile_is_cifar10_lt():
    # the CIFAR10-LT class sizes at imbalance 100 (Cao et al. 2019, Kukleva et al. 2023)
    assert long_tail_counts(5000, 10, 100) == [5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50]
    labels = torch.arange(10).repeat_interleave(100)
    idx = long_tail_indices(labels, imbalance_ratio=10, seed=0)
    assert torch.bincount(labels[idx]).tolist() == long_tail_counts(100, 10, 10)
    assert torch.equal(idx, long_tail_indices(labels, imbalance_ratio=10, seed=0))
    with pytest.raises(ValueError, match="imbalance_ratio"):
        long_tail_counts(10, 10, 0.5)
    assert torch.bincount(labels[stratified_subset(labels, 7)]).tolist() == [7] * 10


@pytest.mark.parametrize("option", [{"label_policy": "exclude"}, {"label_policy": "positives_out"}])
@pytest.mark.parametrize("framework", ["simclr", "mocov2"])
def test_class_labels_reach_a_loss_that_takes_them(framework, option):
    """``--loss_arg label_policy=exclude`` or ``label_policy=positives_out``: the batches' CIFAR labels go to the
    loss (and, for MoCo, into the queue beside its keys); an unlabelled batch is refused in one line."""
    from cl_plugins.integrations.hosts.vision.train import VisionConfig, build_model

    torch.manual_seed(0)
    config = VisionConfig(width=4, proj_hidden=16, proj_dim=8, image_size=16, framework=framework, queue_size=32,
                          loss="macl", loss_args=option)  # fmt: skip
    model = build_model(config)
    images = torch.randint(0, 256, (8, 3, 16, 16), dtype=torch.uint8)
    labels = torch.tensor([0, 1, 0, 2, 1, 3, 3, 0])
    loss = model((images, labels))
    assert torch.isfinite(loss)
    loss.backward()
    if framework == "mocov2":  # both directions' keys enqueued, each with its labels
        assert model.queue.get_labels()[:16].tolist() == labels.tolist() * 2
    with pytest.raises(ValueError, match="needs \\(images, labels\\) batches"):
        model(images)


def test_a_cut_image_archive_is_named_in_one_line(tmp_path):
    from PIL import Image

    archive = tmp_path / "train.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for i in range(20):
            buf = io.BytesIO()
            Image.effect_noise((32, 32), 64 + i).convert("RGB").save(buf, format="PNG")
            info = tarfile.TarInfo(f"train/bird/{i:04d}.png")
            info.size = len(buf.getvalue())
            tar.addfile(info, io.BytesIO(buf.getvalue()))
    assert read_image_folder_tar(archive, ("airplane", "bird"))[0].shape == (20, 3, 32, 32)
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(ValueError, match=r"train.tar.gz is not a readable image archive \(EOFError") as info:
        read_image_folder_tar(archive, ("airplane", "bird"))
    assert "\n" not in str(info.value)
