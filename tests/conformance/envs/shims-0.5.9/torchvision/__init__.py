"""Import-time stand-in for torchvision in the SGLang 0.5.9 conformance environment (not a real torchvision).

SGLang 0.5.9 imports `torchvision.transforms` when `sglang.srt.server_args` is imported
(server_args -> utils.hf_transformers_utils -> configs -> nano_nemotron_vl -> multimodal.internvl_utils), only to
define image preprocessing for InternVL; argument parsing and ServerArgs never call it. PyPI's torchvision
wheels for Linux x86_64 are CUDA builds whose `_C.so` needs libtorch_cuda, so they fail to import beside the
CPU torch ("operator torchvision::nms does not exist"). This package has no dist-info, so transformers still
reports torchvision as unavailable; every transform raises if it is ever called.
"""
