"""One temperature strategy per module; importing this package registers them all."""

from .amcl import AMCLLoss
from .cosine_schedule import CosineScheduleLoss
from .dcl import DCLLoss
from .dual_temperature import DualTemperatureLoss
from .dystress import DySTreSSLoss, dystress_temperature
from .flatnce import FlatNCELoss
from .infonce import InfoNCELoss
from .learnable import LearnableTemperatureLoss
from .macl import MACLLoss
from .temperature_free import TemperatureFreeLoss, effective_inverse_tau

__all__ = [
    "AMCLLoss",
    "CosineScheduleLoss",
    "DCLLoss",
    "DualTemperatureLoss",
    "DySTreSSLoss",
    "FlatNCELoss",
    "InfoNCELoss",
    "LearnableTemperatureLoss",
    "MACLLoss",
    "TemperatureFreeLoss",
    "dystress_temperature",
    "effective_inverse_tau",
]
