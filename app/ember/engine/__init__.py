"""The Pythonic API over the native engine, what a Python user imports: Model, Context,
Session, SamplingParams, Grammar, Embedder and the errors. native.py is the one module that speaks ctypes."""
from __future__ import annotations

from .context import Context, DecodeGate
from .dtypes import dequantize, quantize, quantize_into, type_block, type_name, weight_types
from .embedding import Embedder, is_embedding_model
from .errors import (
    CancelledError,
    ContextFullError,
    EmberError,
    EngineMemoryError,
    FileReadError,
    ModelFormatError,
    UnsupportedModelError,
)
from .grammar import Grammar
from .model import Model, TensorInfo
from .sampling import GenerationStats, Sampler, SamplingParams
from .session import Session
from .speculative import SpeculativeParams
from .system import (
    BackendDevice,
    backend_devices,
    default_threads,
    set_default_placement,
    supported_architectures,
    supported_isas,
    system_info,
)

__all__ = [
    "BackendDevice", "CancelledError", "Context", "ContextFullError", "DecodeGate", "Embedder",
    "EmberError", "EngineMemoryError", "FileReadError", "GenerationStats", "Grammar", "Model",
    "ModelFormatError", "Sampler", "SamplingParams", "Session", "SpeculativeParams", "TensorInfo",
    "UnsupportedModelError", "backend_devices", "default_threads", "dequantize",
    "is_embedding_model", "quantize", "quantize_into",
    "set_default_placement", "supported_architectures", "supported_isas", "system_info",
    "type_block", "type_name", "weight_types",
]
