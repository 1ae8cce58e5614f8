"""ctypes declarations of native/include/ember.h: the one Python file that knows the C ABI."""
from __future__ import annotations

import ctypes
import os
import sys
from ctypes import (
    POINTER,
    Structure,
    c_bool,
    c_char,
    c_char_p,
    c_double,
    c_float,
    c_int32,
    c_int64,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path

ABI_VERSION = 7

token_p = POINTER(c_int32)
PROGRESS_FN = ctypes.CFUNCTYPE(c_bool, c_float, c_void_p)


class ModelParams(Structure):
    _fields_ = [
        ("progress", PROGRESS_FN),
        ("progress_user_data", c_void_p),
        ("cancel", POINTER(c_int32)),
        ("vocab_only", c_bool),
        ("metadata_only", c_bool),
    ]


class ContextParams(Structure):
    _fields_ = [("n_ctx", c_int32), ("n_batch", c_int32), ("n_threads", c_int32),
                ("isa", c_int32), ("backend", c_char_p), ("n_gpu_layers", c_int32),
                ("progress", PROGRESS_FN), ("progress_user_data", c_void_p)]


class EmbedderParams(Structure):
    _fields_ = [("n_threads", c_int32), ("isa", c_int32), ("n_batch", c_int32), ("pooling", c_int32)]


# EMBER_POOLING_* (an embedder's pooling; -1 from ember_model_pooling: not an embedding model)
POOLING_NAMES = {0: "none", 1: "mean", 2: "cls", 3: "last"}


class BackendDevice(Structure):
    _fields_ = [
        ("backend", c_char * 32),
        ("label", c_char * 32),
        ("device", c_int32),
        ("usable", c_bool),
        ("score", c_int32),
        ("name", c_char * 128),
        ("memory_total", c_uint64),
        ("memory_free", c_uint64),
        ("reason", c_char * 512),
        ("path", c_char * 512),
    ]


ISA_LEVELS = {"auto": -1, "scalar": 0, "avx2": 1, "avx512": 2, "neon": 3}


class SamplerParams(Structure):
    _fields_ = [
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("presence_penalty", c_float),
        ("frequency_penalty", c_float),
        ("penalty_last_n", c_int32),
        ("seed", c_uint64),
    ]


class TensorInfo(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("type", c_int32),
        ("type_name", c_char_p),
        ("n_dims", c_int32),
        ("ne", c_int64 * 4),
        ("offset", c_uint64),
        ("n_bytes", c_uint64),
    ]


# status codes (enum ember_status)
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_IO = 2
ERR_FORMAT = 3
ERR_UNSUPPORTED = 4
ERR_OUT_OF_MEMORY = 5
ERR_CANCELLED = 6
ERR_CONTEXT_FULL = 7
ERR_BUFFER_TOO_SMALL = 8
ERR_INTERNAL = 9

_LIB_NAMES = {"win32": "ember.dll", "darwin": "libember.dylib"}


def library_path() -> Path:
    """$EMBER_LIB, else the library built into the package's _native/ folder."""
    env = os.environ.get("EMBER_LIB")
    if env:
        return Path(env)
    name = _LIB_NAMES.get(sys.platform, "libember.so")
    return Path(__file__).resolve().parent.parent / "_native" / name


_SIGNATURES = {
    "ember_abi_version": (c_int32, []),
    "ember_architectures": (c_char_p, []),
    "ember_version": (c_char_p, []),
    "ember_system_info": (c_char_p, []),
    "ember_last_error": (c_char_p, []),
    "ember_status_name": (c_char_p, [c_int32]),
    "ember_model_default_params": (ModelParams, []),
    "ember_model_load": (c_int32, [c_char_p, POINTER(ModelParams), POINTER(c_void_p)]),
    "ember_model_free": (None, [c_void_p]),
    "ember_model_last_error": (c_char_p, [c_void_p]),
    "ember_model_arch": (c_char_p, [c_void_p]),
    "ember_model_ftype_name": (c_char_p, [c_void_p]),
    "ember_model_gguf_version": (c_uint32, [c_void_p]),
    "ember_model_file_size": (c_uint64, [c_void_p]),
    "ember_model_n_params": (c_uint64, [c_void_p]),
    "ember_model_n_vocab": (c_int32, [c_void_p]),
    "ember_model_n_ctx_train": (c_int32, [c_void_p]),
    "ember_model_n_embd": (c_int32, [c_void_p]),
    "ember_model_n_layer": (c_int32, [c_void_p]),
    "ember_model_layout_progress": (ctypes.c_double, [c_void_p, c_bool]),
    "ember_model_meta_count": (c_int64, [c_void_p]),
    "ember_model_meta_get": (c_int32, [c_void_p, c_int64, POINTER(c_char_p), POINTER(c_int32),
                                       POINTER(c_char_p)]),
    "ember_model_tensor_count": (c_int64, [c_void_p]),
    "ember_model_tensor_get": (c_int32, [c_void_p, c_int64, POINTER(TensorInfo)]),
    "ember_model_tensor_dequantize": (c_int32, [c_void_p, c_char_p, POINTER(c_float), c_int64]),
    "ember_type_name": (c_char_p, [c_int32]),
    "ember_type_block_size": (c_int64, [c_int32]),
    "ember_type_block_bytes": (c_int64, [c_int32]),
    "ember_type_is_weight": (c_int32, [c_int32]),
    "ember_dequantize": (c_int32, [c_int32, c_void_p, POINTER(c_float), c_int64]),
    "ember_quantize": (c_int32, [c_int32, POINTER(c_float), c_void_p, c_int64]),
    "ember_tokenize": (c_int32, [c_void_p, c_char_p, c_int32, c_bool, c_bool, token_p, c_int32,
                                 POINTER(c_int32)]),
    "ember_token_to_piece": (c_int32, [c_void_p, c_int32, c_bool, POINTER(c_char), c_int32,
                                       POINTER(c_int32)]),
    "ember_detokenize": (c_int32, [c_void_p, token_p, c_int32, c_bool, c_bool, POINTER(c_char),
                                   c_int32, POINTER(c_int32)]),
    "ember_token_bos": (c_int32, [c_void_p]),
    "ember_token_eos": (c_int32, [c_void_p]),
    "ember_token_eot": (c_int32, [c_void_p]),
    "ember_token_is_eog": (c_bool, [c_void_p, c_int32]),
    "ember_token_is_control": (c_bool, [c_void_p, c_int32]),
    "ember_token_text": (c_char_p, [c_void_p, c_int32]),
    "ember_vocab_add_bos": (c_bool, [c_void_p]),
    "ember_vocab_add_eos": (c_bool, [c_void_p]),
    "ember_context_default_params": (ContextParams, []),
    "ember_isa_supported": (c_bool, [c_int32]),
    "ember_backend_device_count": (c_int32, []),
    "ember_backend_device_get": (c_int32, [c_int32, POINTER(BackendDevice)]),
    "ember_context_backend": (c_char_p, [c_void_p]),
    "ember_context_backend_note": (c_char_p, [c_void_p]),
    "ember_context_backend_name": (c_char_p, [c_void_p]),
    "ember_context_n_gpu_layers": (c_int32, [c_void_p]),
    "ember_context_create": (c_int32, [c_void_p, POINTER(ContextParams), POINTER(c_void_p)]),
    "ember_context_free": (None, [c_void_p]),
    "ember_context_last_error": (c_char_p, [c_void_p]),
    "ember_context_n_ctx": (c_int32, [c_void_p]),
    "ember_context_n_past": (c_int32, [c_void_p]),
    "ember_context_rewind_limit": (c_int32, [c_void_p]),
    "ember_context_restart_point": (c_int32, [c_void_p, c_int32]),
    "ember_context_n_snapshots": (c_int32, [c_void_p]),
    "ember_context_state_bytes": (c_uint64, [c_void_p]),
    "ember_context_set_profiling": (None, [c_void_p, c_bool]),
    "ember_context_profile": (c_char_p, [c_void_p]),
    "ember_context_read_bandwidth": (c_int32, [c_void_p, c_double, POINTER(c_double), POINTER(c_uint64)]),
    "ember_context_set_cancel_flag": (None, [c_void_p, POINTER(c_int32)]),
    "ember_decode": (c_int32, [c_void_p, token_p, c_int32, c_int32, c_bool]),
    "ember_get_logits": (POINTER(c_float), [c_void_p, c_int32]),
    "ember_model_pooling": (c_int32, [c_void_p]),
    "ember_embedder_default_params": (EmbedderParams, []),
    "ember_embedder_create": (c_int32, [c_void_p, POINTER(EmbedderParams), POINTER(c_void_p)]),
    "ember_embedder_free": (None, [c_void_p]),
    "ember_embedder_last_error": (c_char_p, [c_void_p]),
    "ember_embedder_n_embd": (c_int32, [c_void_p]),
    "ember_embedder_n_seq_max": (c_int32, [c_void_p]),
    "ember_embedder_pooling": (c_int32, [c_void_p]),
    "ember_embedder_set_cancel_flag": (None, [c_void_p, POINTER(c_int32)]),
    "ember_embed": (c_int32, [c_void_p, token_p, POINTER(c_int32), c_int32, c_bool, POINTER(c_float),
                              c_int64]),
    "ember_sampler_default_params": (SamplerParams, []),
    "ember_sampler_create": (c_int32, [POINTER(SamplerParams), POINTER(c_void_p)]),
    "ember_sampler_free": (None, [c_void_p]),
    "ember_sampler_reset": (None, [c_void_p]),
    "ember_sampler_accept": (None, [c_void_p, c_int32]),
    "ember_sampler_sample": (c_int32, [c_void_p, POINTER(c_float), c_int32, POINTER(c_int32)]),
    "ember_sampler_distribution": (c_int32, [c_void_p, POINTER(c_float), c_int32, POINTER(c_int32),
                                             POINTER(c_float), c_int32, POINTER(c_int32)]),
    "ember_grammar_create": (c_int32, [c_void_p, c_char_p, c_int32, c_char_p, POINTER(c_void_p)]),
    "ember_grammar_free": (None, [c_void_p]),
    "ember_grammar_reset": (c_int32, [c_void_p]),
    "ember_grammar_apply": (c_int32, [c_void_p, POINTER(c_float), c_int32, POINTER(c_int32)]),
    "ember_grammar_accept": (c_int32, [c_void_p, c_int32]),
    "ember_grammar_accept_text": (c_int32, [c_void_p, c_char_p, c_int32]),
    "ember_grammar_can_end": (c_bool, [c_void_p]),
    "ember_grammar_is_done": (c_bool, [c_void_p]),
}

_lib: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    """The loaded engine library (loaded once, signatures declared)."""
    global _lib
    if _lib is None:
        path = library_path()
        if not path.is_file():
            raise OSError(f"Ember's native library is missing at {path}; build it with `pip install .`")
        handle = ctypes.CDLL(str(path))
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(handle, name)
            fn.restype = restype
            fn.argtypes = argtypes
        version = handle.ember_abi_version()
        if version != ABI_VERSION:
            raise OSError(f"{path} has ABI version {version}, this package expects {ABI_VERSION}")
        _lib = handle
    return _lib


def decode_str(b: bytes | None) -> str:
    return b.decode("utf-8", errors="replace") if b else ""
