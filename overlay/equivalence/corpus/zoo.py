# mypy: allow-subclassing-any
"""Real network shapes for the corpus's ``zoo`` group, in plain torch: published structures
at a width that lowers in seconds, initialised under the corpus seed (no weights downloaded)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from overlay.equivalence.corpus.models import Builder, identity_grid, image, int16_output_graph

Gate = type[nn.Module]
Squeeze = tuple[int, Gate] | None  # a squeeze-excite's width and gate


def conv_bn(cin: int, cout: int, k: int, s: int, groups: int = 1) -> list[nn.Module]:
    """Return a bias-free conv (padding k // 2) and its BatchNorm."""
    return [
        nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]


def randomise_bn(module: nn.Module) -> nn.Module:
    """Give BatchNorm layers non-trivial statistics (as a trained net has)."""
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d | nn.LayerNorm):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                if isinstance(m, nn.BatchNorm2d):
                    assert m.running_mean is not None and m.running_var is not None
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 1.5)
    return module.eval()


# --- the inverted residual of MobileNetV2/V3 and EfficientNet ---------------------------


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeeze: int, gate: Gate) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.gate = gate()

    def forward(self, x: Any) -> Any:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(torch.relu(self.fc1(s))))


class Bottleneck(nn.Module):
    """An inverted residual: 1x1 expansion (if ``hidden != cin``), depthwise ``k`` x ``k``,
    squeeze-excite (``se``: its squeeze width and gate), linear 1x1 projection."""

    def __init__(  # noqa: PLR0917 - the papers' table row
        self, cin: int, hidden: int, cout: int, k: int, s: int, act: Gate, se: Squeeze = None
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if hidden != cin:
            layers += [*conv_bn(cin, hidden, 1, 1), act()]
        layers += [*conv_bn(hidden, hidden, k, s, groups=hidden), act()]
        if se:
            layers.append(SqueezeExcite(hidden, *se))
        layers += conv_bn(hidden, cout, 1, 1)
        self.block = nn.Sequential(*layers)
        self.residual = s == 1 and cin == cout

    def forward(self, x: Any) -> Any:
        y = self.block(x)
        return x + y if self.residual else y


# --- MobileNetV2 (inverted residuals, ReLU6, linear bottlenecks) ----------------------


class MobileNetV2(nn.Module):
    # (expand, channels, repeats, stride) of the paper's seven stages at width 0.25,
    # repeats cut to 1-2 per stage (10 blocks instead of 17) to keep the lowering short.
    SETTINGS = ((1, 8, 1, 1), (6, 8, 2, 2), (6, 8, 2, 2), (6, 16, 2, 2), (6, 24, 1, 1),
                (6, 40, 1, 2), (6, 80, 1, 1))  # fmt: skip
    # The paper's (and torchvision's) full width: 17 blocks, 32 -> 1280 channels.
    FULL = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
            (6, 160, 3, 2), (6, 320, 1, 1))  # fmt: skip

    def __init__(
        self,
        classes: int = 10,
        settings: tuple[tuple[int, int, int, int], ...] = SETTINGS,
        widths: tuple[int, int] = (8, 320),  # the stem's and the last conv's channels
    ) -> None:
        super().__init__()
        stem, last = widths
        layers: list[nn.Module] = [*conv_bn(3, stem, 3, 2), nn.ReLU6()]
        cin = stem
        for expand, cout, repeats, stride in settings:
            for i in range(repeats):
                step = stride if i == 0 else 1
                layers.append(Bottleneck(cin, cin * expand, cout, 3, step, nn.ReLU6))
                cin = cout
        layers += [*conv_bn(cin, last, 1, 1), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(last, classes)

    def forward(self, x: Any) -> Any:
        x = self.features(x)
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def mobilenet_v2_full(size: int = 64, batches: int = 4) -> tuple[Any, tuple[Any, ...]]:
    """Full-width MobileNetV2 as torchvision builds it (its layers, ReLU6, 1000 classes and
    its initialisation: convs Kaiming-normal fan-out, the classifier N(0, 0.01)), with
    BatchNorm statistics estimated on ``batches`` batches of seeded noise, as a net whose
    statistics come from data rather than from a distribution has them."""
    net = MobileNetV2(1000, MobileNetV2.FULL, (32, 1280))
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            m.momentum = None  # a cumulative average over the noise batches
    net.train()
    with torch.no_grad():
        for _ in range(batches):
            net(torch.randn(8, 3, size, size))
    return net.eval(), (image(1, 3, size, size),)


# --- MobileNetV3-small (hardswish, squeeze-excite with hardsigmoid) --------------------


class MobileNetV3Small(nn.Module):
    HS, RE = nn.Hardswish, nn.ReLU
    # (kernel, expanded, out, squeeze-excite, activation, stride), channels at width 0.5.
    SETTINGS = ((3, 8, 8, True, RE, 2), (3, 40, 16, False, RE, 2), (3, 48, 16, False, RE, 1),
                (5, 48, 24, True, HS, 2), (5, 120, 24, True, HS, 1), (5, 64, 24, True, HS, 1),
                (5, 72, 48, True, HS, 2), (5, 144, 48, True, HS, 1))  # fmt: skip

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [*conv_bn(3, 8, 3, 2), nn.Hardswish()]
        cin = 8
        for k, hidden, cout, se, act, s in self.SETTINGS:
            squeeze = (max(8, hidden // 4), nn.Hardsigmoid) if se else None
            layers.append(Bottleneck(cin, hidden, cout, k, s, act, squeeze))
            cin = cout
        layers += [*conv_bn(cin, 288, 1, 1), nn.Hardswish()]
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(288, 128), nn.Hardswish(), nn.Linear(128, classes))

    def forward(self, x: Any) -> Any:
        x = self.features(x)
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# --- ResNet-18 (basic blocks [2, 2, 2, 2], projection shortcuts, max pool) ------------


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            *conv_bn(cin, cout, 3, stride), nn.ReLU(), *conv_bn(cout, cout, 3, 1)
        )
        self.short = (
            nn.Sequential(*conv_bn(cin, cout, 1, stride))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: Any) -> Any:
        return torch.relu(self.body(x) + self.short(x))


class ResNet18(nn.Module):
    def __init__(self, width: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(*conv_bn(3, width, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks: list[nn.Module] = []
        cin = width
        for i, cout in enumerate((width, width * 2, width * 4, width * 8)):
            blocks += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: Any) -> Any:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# --- EfficientNet/MNASNet-style (MBConv with SiLU and squeeze-excite) ------------------


class EfficientNetB0Small(nn.Module):
    # (expand, channels, repeats, stride, kernel), EfficientNet-B0 stages at width 0.25,
    # one block per stage.
    SETTINGS = ((1, 8, 1, 1, 3), (6, 8, 1, 2, 3), (6, 12, 1, 2, 5), (6, 20, 1, 2, 3),
                (6, 28, 1, 1, 5), (6, 48, 1, 2, 5))  # fmt: skip

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [*conv_bn(3, 8, 3, 2), nn.SiLU()]
        cin = 8
        for expand, cout, repeats, stride, k in self.SETTINGS:
            for i in range(repeats):
                step, se = stride if i == 0 else 1, (max(4, cin // 4), nn.Sigmoid)
                layers.append(Bottleneck(cin, cin * expand, cout, k, step, nn.SiLU, se))
                cin = cout
        layers += [*conv_bn(cin, 160, 1, 1), nn.SiLU()]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(160, classes)

    def forward(self, x: Any) -> Any:
        x = self.features(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# --- DeiT-tiny-style (patch embedding, class token, pre-norm attention blocks) --------


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Any) -> Any:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Linear(dim * 4, dim))

    def forward(self, x: Any) -> Any:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DeiTTiny(nn.Module):
    def __init__(self, dim: int = 48, depth: int = 1, heads: int = 3, patch: int = 8) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, patch)
        tokens = (32 // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*(TransformerBlock(dim, heads) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x: Any) -> Any:
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


# --- a small LSTM (gates written out, unrolled over a short sequence) -----------------


class SmallLSTM(nn.Module):
    def __init__(self, features: int = 16, hidden: int = 32, steps: int = 4) -> None:
        super().__init__()
        self.hidden, self.steps = hidden, steps
        self.gates_x = nn.Linear(features, 4 * hidden)
        self.gates_h = nn.Linear(hidden, 4 * hidden, bias=False)
        self.out = nn.Linear(hidden, 8)

    def forward(self, x: Any) -> Any:
        h = torch.zeros(x.shape[0], self.hidden)
        c = torch.zeros(x.shape[0], self.hidden)
        for t in range(self.steps):
            i, f, g, o = (self.gates_x(x[:, t]) + self.gates_h(h)).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return self.out(h)


# --- a keyword spotter: MFCC frames -> nn.GRU (or nn.LSTM) -> linear to 12 classes ---------


class KeywordSpotter(nn.Module):
    """The Ethos-U zoo's KWS RNN shape: ``frames`` MFCC frames of ``features`` coefficients,
    one recurrent layer (``nn.GRU`` or ``nn.LSTM``, as exported), its last state to the
    classes. The lowering unrolls the recurrence: its graph grows linearly with ``frames``."""

    def __init__(
        self, cell: str = "gru", features: int = 10, hidden: int = 64, classes: int = 12
    ) -> None:
        super().__init__()
        recurrent = {"gru": nn.GRU, "lstm": nn.LSTM}[cell]
        self.rnn = recurrent(features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: Any) -> Any:
        states, _ = self.rnn(x)
        return self.head(states[:, -1])


def keyword_spotter(cell: str = "gru", frames: int = 49) -> tuple[nn.Module, tuple[Any, ...]]:
    """Return a keyword spotter and one utterance (``1 x frames x 10``) under the caller's seed."""
    return KeywordSpotter(cell).eval(), (torch.randn(1, frames, 10),)


# --- U-Net (encoder/decoder, ConvTranspose2d upsampling, skip cat, relu6 / clamp) -----


class UNet(nn.Module):
    def __init__(self, width: int = 8) -> None:
        super().__init__()

        def double(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(
                *conv_bn(cin, cout, 3, 1), nn.ReLU6(), *conv_bn(cout, cout, 3, 1), nn.ReLU6()
            )

        w = width
        self.enc1, self.enc2, self.mid = double(3, w), double(w, 2 * w), double(2 * w, 4 * w)
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
        self.dec2 = double(4 * w, 2 * w)
        self.up1 = nn.ConvTranspose2d(2 * w, w, 2, stride=2)
        self.dec1 = double(2 * w, w)
        self.head = nn.Conv2d(w, 2, 1)

    def forward(self, x: Any) -> Any:
        e1 = self.enc1(x)
        # stride given explicitly: 1.2.0's pool support check reads node.args[2]
        # and raises IndexError on F.max_pool2d(x, 2) (default stride).
        e2 = self.enc2(F.max_pool2d(e1, 2, 2))
        m = self.mid(F.max_pool2d(e2, 2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return torch.clamp(self.head(d1), -1.0, 1.0)


# --- the seed's grid warp: a conv branch makes grid positions for grid_sample ---------


class GridWarp(nn.Module):
    """Image -> conv offsets -> tanh -> identity grid + offsets -> grid_sample(image).

    The grid (positions in [-1, 1]) is the tensor the seed quantises to int16 so that
    the delegate can emit it; grid_sample itself runs where the backend puts it.
    """

    def __init__(self, size: int = 16) -> None:
        super().__init__()
        self.offsets = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 2, 3, padding=1)
        )
        self.register_buffer("base", identity_grid(size))

    def grid(self, x: Any) -> Any:
        return self.base + torch.tanh(self.offsets(x)).permute(0, 2, 3, 1) * 0.25

    def forward(self, x: Any) -> Any:
        return F.grid_sample(x, self.grid(x), mode="bilinear", align_corners=True)


class GridPositions(GridWarp):
    """The grid branch alone: the positions are the output, for a grid sampler elsewhere.

    Offsets are bounded with hardtanh here: 1.2.0's int16 tanh is wrong (see the README),
    and this case is about what fix 1 does to the int16 output, not about tanh.
    """

    def grid(self, x: Any) -> Any:
        return self.base + F.hardtanh(self.offsets(x)).permute(0, 2, 3, 1) * 0.25

    def forward(self, x: Any) -> Any:
        return self.grid(x)


def int16_grid(spec: str) -> tuple[Any, tuple[Any, ...]]:
    """The seed's deployment: a16w8 grid positions returned as an int16 graph output."""
    return int16_output_graph(GridPositions().eval(), (image(1, 3, 16, 16),), spec)


NETWORKS: dict[str, Builder] = {
    "mobilenet_v2": lambda: (randomise_bn(MobileNetV2()), (image(1, 3, 32, 32),)),
    "mobilenet_v2_full": mobilenet_v2_full,
    "mobilenet_v3_small": lambda: (randomise_bn(MobileNetV3Small()), (image(1, 3, 32, 32),)),
    "resnet18": lambda: (randomise_bn(ResNet18()), (image(1, 3, 32, 32),)),
    "efficientnet_b0": lambda: (randomise_bn(EfficientNetB0Small()), (image(1, 3, 32, 32),)),
    "deit_tiny": lambda: (randomise_bn(DeiTTiny()), (image(1, 3, 32, 32),)),
    "lstm": lambda: (SmallLSTM().eval(), (torch.randn(1, 4, 16),)),
    "gru_kws": keyword_spotter,
    "unet": lambda: (randomise_bn(UNet()), (image(1, 3, 32, 32),)),
    "grid_warp": lambda: (GridWarp().eval(), (image(1, 3, 16, 16),)),
    "grid_warp_int16_grid_intfp16": lambda: int16_grid("TOSA-1.0+INT+FP+int16"),
    "grid_warp_int16_grid_int16": lambda: int16_grid("TOSA-1.0+INT+int16"),
}
