"""Build the built-in model's training corpus, tokenizer and token arrays (rerunnable).

    python -m training.corpus.build_corpus [--out .corpus] [--generated 4000] [--ordinary 30000] [--tokenizer DIR]

Steps, each skipped when its output is already there:
1. fetch: `pip download` the pinned packages below (sdists or wheels) into OUT/downloads, and
   the pinned Debian source packages (their `.orig` tarballs, checked against the SHA-256 of
   Debian's `Sources` index, and the `.debian.tar.xz` with `debian/copyright`) from
   deb.debian.org's pool into OUT/downloads/debian-pool, unpacked under OUT/downloads/NAME;
2. collect: CUDA sources (.cu/.cuh, and headers that are clearly CUDA: they contain
   `__global__`, `__shared__` or `threadIdx`), plus kernels from training/corpus/generate_kernels.py
   and the ordinary kernels of training/corpus/ordinary_kernels.py;
   duplicates (whitespace aside) dropped; generated kernels also inside load_inline
   strings; nothing from the project's KernelBench folder nor DICE's evaluation records;
3. split: the packages marked held_out are the `test` split whole (held out by repository,
   for benchmarks/builtin_eval.py); of the others about 2% of files (by a hash) are `valid`;
4. tokenizer: byte-level BPE trained on the train split (OUT/tokenizer), or with
   `--tokenizer DIR` an existing model's tokenizer kept as it is (to train that model on);
5. data: the texts of each split with, per line, the character offsets of its start, its
   first non-blank character and its end, and the brace-matched blocks, from which
   training/fim_data.py cuts fill-in-the-middle spans (and tokenizes them as inference does).

OUT/stats.json records source, version, licence, files, bytes and tokens of every part: the
data card in docs/model-card.md is written from it.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import random
import json
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from training.corpus.cuda_tokenizer import build_tokenizer, save_tokenizer
from training.corpus.generate_kernels import generate
from training.corpus.ordinary_kernels import generate as generate_ordinary

CUDA_SUFFIXES = (".cu", ".cuh")
HEADER_SUFFIXES = (".h", ".hpp", ".inl")
CLEARLY_CUDA = re.compile(r"__global__|__shared__|threadIdx")
MAX_FILE_BYTES = 200_000      # generated tables and amalgamations teach nothing useful
VALID_PERCENT = 2
DEBIAN_MIRROR = "http://deb.debian.org/debian"


@dataclass(frozen=True)
class Source:
    name: str            # short name used in the data card
    requirement: str     # pip requirement, pinned so that the corpus is reproducible
    sdist: bool          # the CUDA files are in the sdist (else in the wheel)
    licence: str
    url: str = ""                   # default for a Debian source: its pool folder on DEBIAN_MIRROR
    held_out: bool = False          # the whole package is the test split (held out by repository)
    exclude: tuple[str, ...] = ()   # path globs not taken (other licences, generated code)
    include: tuple[str, ...] = ()   # path globs taken (default: every path)
    python_strings: bool = False    # the CUDA is in Python string literals (SourceModule, RawKernel)
    # A Debian source package instead of a pip one: (pool path, SHA-256) of its tarballs, as
    # debian_tarballs() picks them from the package's stanza in dists/*/{main,contrib}/source/Sources.xz.
    # Its files are under downloads/NAME/orig/TARBALL/ (paths for include/exclude start there).
    debian: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.url and self.debian:
            object.__setattr__(self, "url", f"{DEBIAN_MIRROR}/{self.debian[0][0].rsplit('/', 1)[0]}/")


SOURCES = [
    Source("cupy", "cupy==14.2.0", True, "MIT (CuPy); CCCL/CUB headers: Apache-2.0 WITH LLVM-exception / BSD-3-Clause",
           "https://pypi.org/project/cupy/"),
    Source("nvidia-cutlass", "nvidia-cutlass==4.2.0.0", False, "BSD-3-Clause",
           "https://pypi.org/project/nvidia-cutlass/"),
    Source("awkward", "awkward==2.14.0", True, "BSD-3-Clause", "https://pypi.org/project/awkward/"),
    Source("numba-cuda", "numba-cuda==0.24.0", True, "BSD-2-Clause", "https://pypi.org/project/numba-cuda/"),
    Source("vllm", "vllm==0.34.0", True, "Apache-2.0", "https://pypi.org/project/vllm/"),
    Source("deepspeed", "deepspeed==0.19.8", True, "Apache-2.0", "https://pypi.org/project/deepspeed/"),
    Source("llama-cpp-python", "llama-cpp-python==0.3.36", True, "MIT (llama-cpp-python and the ggml it vendors)",
           "https://pypi.org/project/llama-cpp-python/"),
    Source("xgboost", "xgboost==3.2.0", True, "Apache-2.0", "https://pypi.org/project/xgboost/"),
    # mmcv's LICENSES.md puts these operations under the NVIDIA Source Code License.
    Source("mmcv", "mmcv==2.2.0", True, "Apache-2.0 (NVIDIA-licensed operations excluded)",
           "https://pypi.org/project/mmcv/",
           exclude=("*upfirdn2d*", "*fused_bias_leakyrelu*", "*bias_act*", "*filtered_lrelu*")),
    Source("mamba-ssm", "mamba-ssm==2.3.2.post1", True, "Apache-2.0", "https://pypi.org/project/mamba-ssm/"),
    Source("torch-harmonics", "torch-harmonics==0.8.0", True, "BSD-3-Clause",
           "https://pypi.org/project/torch-harmonics/"),
    Source("gsplat", "gsplat==1.5.3", True, "Apache-2.0", "https://pypi.org/project/gsplat/"),
    Source("torch-scatter", "torch-scatter==2.1.2", True, "MIT", "https://pypi.org/project/torch-scatter/"),
    # --- Debian source packages: upstream tarballs pinned by exact Debian version and
    # SHA-256; each licence read from the package's debian/copyright and the files' own headers.
    # darknet: debian/copyright says "GPL-3.0+ or MIT or WTFPL" for Files: *; taken under MIT (LICENSE.mit).
    Source("darknet", "darknet 0.0.0+git20180914.61c9d02e-2 (Debian)", False,
           "MIT (offered as GPL-3.0+ or MIT or WTFPL; LICENSE.mit, debian/copyright)",
           debian=(("pool/main/d/darknet/darknet_0.0.0+git20180914.61c9d02e.orig.tar.xz",
                    "ec536ae11853846aab96183d8ec18730a46cce71f7d935768d235029329f9e93"),
                   ("pool/main/d/darknet/darknet_0.0.0+git20180914.61c9d02e-2.debian.tar.xz",
                    "3d987cbe63e04ec6c106370fbcb9778b2a83cad810e132c27021e6227fd4d6e6"))),
    Source("bart", "bart 1.0.00-2 (Debian)", False,
           "BSD-3-Clause (debian/copyright; src/misc/ya_getopt BSD-2-Clause-Views, no CUDA there)",
           debian=(("pool/main/b/bart/bart_1.0.00.orig.tar.gz",
                    "05eb050759436cb183d8c576a88967ad9d3a987270e68dcdb78663ba4d7ef1e0"),
                   ("pool/main/b/bart/bart_1.0.00-2.debian.tar.xz",
                    "21d7ed272b87c60be0ab011d4db6e214fa908a409f4b3b42772351c20f5acb93"))),
    # dlib's 200 MB orig-dlib-models tarball (trained models, no code) is not fetched.
    Source("dlib", "dlib 19.24+dfsg-1 (Debian)", False, "BSL-1.0 (Boost; debian/copyright)",
           debian=(("pool/main/d/dlib/dlib_19.24+dfsg.orig.tar.bz2",
                    "66b4263822a2ff91a3e769e501c7d7927a13089e178c1427ec19cb0475823cf6"),
                   ("pool/main/d/dlib/dlib_19.24+dfsg-1.debian.tar.xz",
                    "a8983fd91cbdc4500c4b2a5db9f50f46794c6d51cf773c368600db93604ef0b7"))),
    Source("faiss", "faiss 1.7.3-2 (Debian)", False, "MIT (Expat; debian/copyright, LICENSE)",
           debian=(("pool/main/f/faiss/faiss_1.7.3.orig.tar.gz",
                    "3e4fac26d8c9e9008ecea4ae5fc414c658998fce4ba75835058b1a71d3516002"),
                   ("pool/main/f/faiss/faiss_1.7.3-2.debian.tar.xz",
                    "a351977533afa5575b21de74a58cacb66d846006b1ef971bed85e01e66eb7f94"))),
    # OpenCV 4.10 and its contrib tarball (the cuda* modules); Files: * is "Apache-2.0 AND BSD-3-Clause",
    # the CUDA files carry OpenCV's 3-clause BSD header; no file in a CUDA folder has another licence.
    Source("opencv", "opencv 4.10.0+dfsg-9 (Debian; orig and orig-contrib)", False,
           "Apache-2.0 AND BSD-3-Clause (debian/copyright; file headers: OpenCV's 3-clause BSD)",
           debian=(("pool/main/o/opencv/opencv_4.10.0+dfsg.orig.tar.xz",
                    "4ca619efbad524c550771ab110332fc81293fb720bd03980fe58bc15f9ca3be8"),
                   ("pool/main/o/opencv/opencv_4.10.0+dfsg.orig-contrib.tar.xz",
                    "bc499ce3a1421b2474c20cce9949a574311bb3b6a71a5527e00e6f71cdb646b9"),
                   ("pool/main/o/opencv/opencv_4.10.0+dfsg-9.debian.tar.xz",
                    "4aff1e822b34dd1c045930cdf9cb5e77063cbb7e88a1ad692c8807e3b6c07290"))),
    # PyTorch (BSD-3-Clause; Files: caffe2/* Apache-2.0; UpSampleLinear1d.cu BSD-2-Clause). Left out by
    # path: the files debian/copyright puts under GPL-3.0+ (c10/util/Array.h) or CC-BY-SA-4.0
    # (ATen/detail/FunctionTraits.h), and the generated per-type instantiations of the flash and
    # memory-efficient attention kernels.
    Source("pytorch", "pytorch 2.6.0+dfsg-7 (Debian)", False,
           "BSD-3-Clause (debian/copyright; caffe2: Apache-2.0; UpSampleLinear1d.cu: BSD-2-Clause)",
           exclude=("*/c10/util/Array.h", "*/ATen/detail/FunctionTraits.h", "*/third_party/*",
                    "*/mem_eff_attention/kernels/*", "*/flash_attn/kernels/*"),
           debian=(("pool/main/p/pytorch/pytorch_2.6.0+dfsg.orig.tar.xz",
                    "099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff"),
                   ("pool/main/p/pytorch/pytorch_2.6.0+dfsg-7.debian.tar.xz",
                    "3290d4e5168b6e44191882213f61ad41c134a912fe11a44364c2e74f81f68af0"))),
    # NCCL: only the orig tarball is on the mirror (the .debian.tar.xz of 2.29.7-1-1 is not), so the licence
    # is upstream's LICENSE.txt (Apache-2.0, parts BSD-3-Clause), matched by each file's SPDX line.
    Source("nvidia-nccl", "nvidia-nccl 2.29.7-1-1 (Debian contrib; orig tarball)", False,
           "Apache-2.0 (parts BSD-3-Clause; LICENSE.txt and SPDX headers)",
           debian=(("pool/contrib/n/nvidia-nccl/nvidia-nccl_2.29.7-1.orig.tar.gz",
                    "e67239212c395bfdb398a7519491840d06fdf6b599c299f97c7ed0109777bba1"),)),
    # PCL, ONNX Runtime and Open3D: only the orig tarball is on the mirror, so their licence is upstream's
    # LICENSE file, checked against every collected file's header.
    Source("pcl", "pcl 1.15.0+dfsg-2 (Debian; orig tarball)", False,
           "BSD-3-Clause (LICENSE.txt; file headers, NVIDIA's NCV files in gpu/people too)",
           debian=(("pool/main/p/pcl/pcl_1.15.0+dfsg.orig.tar.xz",
                    "2a7258e2bdd298241eeb720f240832206945bc935d2e0003fd06bd8906f5fb7d"),)),
    # ONNX Runtime: MIT; its CUDA kernels taken from FasterTransformer/TensorRT (Apache-2.0), CUTLASS and
    # flash-attention (BSD-3-Clause) say so in their headers. The ROCm (HIP) copies are left out.
    Source("onnxruntime", "onnxruntime 1.21.0+dfsg-1 (Debian; orig tarball)", False,
           "MIT (LICENSE; some kernels Apache-2.0 or BSD-3-Clause by their headers)",
           exclude=("*/rocm/*",),
           debian=(("pool/main/o/onnxruntime/onnxruntime_1.21.0+dfsg.orig.tar.xz",
                    "32df1f82bd6b07b18372c0f387133214905cbde7a586b3ad83f0ed0075f80273"),)),
    Source("open3d", "open3d 0.19.0-7 (Debian; orig tarball)", False,
           "MIT (LICENSE; SPDX headers; the slab hash map's files also Apache-2.0)",
           debian=(("pool/main/o/open3d/open3d_0.19.0.orig.tar.xz",
                    "fb72d73f3c6a8699682d3330f25cc9da6c2436073c896e64786a3281df5a1d15"),)),
    # COLMAP: only src/ (BSD-3-Clause, debian/copyright's BSD-3-clause-special); lib/PBA (GPL-3+) and
    # lib/SiftGPU (its header: educational and non-profit use) are left out.
    Source("colmap", "colmap 3.8-1 (Debian)", False, "BSD-3-Clause (debian/copyright; src/ only)",
           include=("*/src/*",),
           debian=(("pool/main/c/colmap/colmap_3.8.orig.tar.gz",
                    "02288f8f61692fe38049d65608ed832b31246e7792692376afb712fa4cef8775"),
                   ("pool/main/c/colmap/colmap_3.8-1.debian.tar.xz",
                    "809fd155053689e9a8666691b874ae1f218abccb5f8f627358d26ed78926a87f"))),
    Source("hypre", "hypre 2.26.0-3 (Debian)", False, "Apache-2.0 OR MIT (debian/copyright; SPDX headers)",
           debian=(("pool/main/h/hypre/hypre_2.26.0.orig.tar.gz",
                    "c214084bddc61a06f3758d82947f7f831e76d7e3edeac2c78bb82d597686e05d"),
                   ("pool/main/h/hypre/hypre_2.26.0-3.debian.tar.xz",
                    "fb5cff595d3b98a8b3b65b8fa79119cb945e780481e571e9b60d192cd6e0975b"))),
    Source("petsc", "petsc 3.18.5+dfsg1-1 (Debian)", False, "BSD-2-Clause (debian/copyright)",
           debian=(("pool/main/p/petsc/petsc_3.18.5+dfsg1.orig.tar.xz",
                    "e80001ace81706271c25701d3200e75cb62d69194f9e0ed85e4ae213eecb33b6"),
                   ("pool/main/p/petsc/petsc_3.18.5+dfsg1-1.debian.tar.xz",
                    "9383013c05342f2ba5128dee7010a1f43683670dc2003c01b87d9cd0b17c065d"))),
    Source("sundials", "sundials 7.1.1+dfsg1-10 (Debian)", False,
           "BSD-3-Clause (debian/copyright: BSD-3-clause-with-LLNS-notice; SPDX headers)",
           debian=(("pool/main/s/sundials/sundials_7.1.1+dfsg1.orig.tar.xz",
                    "8ed409272af77e958d0ac02fd72199d8643063faf2aa61811e5c615d7db5cf8e"),
                   ("pool/main/s/sundials/sundials_7.1.1+dfsg1-10.debian.tar.xz",
                    "050abde6085d14c8bc472303ae3f0fd49c4bc5f72c4a90a1df7586c2620ae654"))),
    Source("opensubdiv", "opensubdiv 3.6.0-3 (Debian)", False, "Apache-2.0 (debian/copyright; Pixar's modified Apache 2.0)",
           debian=(("pool/main/o/opensubdiv/opensubdiv_3.6.0.orig.tar.xz",
                    "09dcab919207361addeba64792e9ebd07dae65881ef205a75be68b087989434e"),
                   ("pool/main/o/opensubdiv/opensubdiv_3.6.0-3.debian.tar.xz",
                    "1efc0447df15a0a194b7d9d1715cf76db68a71a3d2de33b59db7a6f0aa040d45"))),
    # More PyPI sdists; licences from LICENSE / PKG-INFO and the files' headers.
    Source("fairseq", "fairseq==0.12.2", True, "MIT (LICENSE)", "https://pypi.org/project/fairseq/"),
    # MinkowskiEngine: MIT (PKG-INFO classifier, file headers); src/3rdparty (from cuDF) Apache-2.0;
    # src/sharedmem.cuh, under NVIDIA's EULA, left out.
    Source("minkowskiengine", "MinkowskiEngine==0.5.4", True,
           "MIT (PKG-INFO, file headers; src/3rdparty from cuDF: Apache-2.0; NVIDIA-EULA sharedmem.cuh excluded)",
           "https://pypi.org/project/MinkowskiEngine/", exclude=("*/sharedmem.cuh",)),
    # NATTEN: only its own csrc (its bundled CUTLASS copy, 3 MB, is left out: CUTLASS is a source already).
    Source("natten", "natten==0.21.7", True, "MIT (LICENSE; NOTICE: parts based on CUTLASS/xFormers, BSD-3-Clause)",
           "https://pypi.org/project/natten/", include=("*/csrc/*",)),
    Source("pytorch-fast-transformers", "pytorch-fast-transformers==0.4.0", True, "MIT (PKG-INFO)",
           "https://pypi.org/project/pytorch-fast-transformers/"),
    # --- More sources: ordinary kernels first (layers, element-wise ops, reductions);
    # each licence read from debian/copyright where the mirror has the .debian.tar.xz, else from the
    # upstream LICENSE, checked against the collected files' headers.
    # Caffe: debian/copyright's Files: * is CAFFE_LICENSE_BSD-2-Clause (its gtest copy, BSD-3, has no CUDA).
    Source("caffe", "caffe 1.0.0+git20180821.99bd997-8 (Debian)", False,
           "BSD-2-Clause (debian/copyright: CAFFE_LICENSE_BSD-2-Clause)",
           debian=(("pool/main/c/caffe/caffe_1.0.0+git20180821.99bd997.orig.tar.gz",
                    "e0eb3f06794f7402c77b7dec8e8480273ee1a1bb192e9122b621a69d4147ad0c"),
                   ("pool/main/c/caffe/caffe_1.0.0+git20180821.99bd997-8.debian.tar.xz",
                    "07cf073227494a6b07234e40cb5df91db566616593eef9baafdc4d06ad159f21"))),
    Source("gloo", "gloo 0.0~git20250912.d97133a-2 (Debian)", False, "BSD-3-Clause (debian/copyright; file headers)",
           debian=(("pool/main/g/gloo/gloo_0.0~git20250912.d97133a.orig.tar.xz",
                    "43d930375720059ac67b1619c7d020d5d2cee79757caf4e75a1bfedb8eeb2b42"),
                   ("pool/main/g/gloo/gloo_0.0~git20250912.d97133a-2.debian.tar.xz",
                    "3e4757f69ef96d07235d4aceac33fae6dde3f8627fc639bd22f7188ba3e303bf"))),
    # torchvision and torchaudio (Debian's pytorch-vision, pytorch-audio): only the orig tarballs are on the
    # mirror, so the licence is upstream's LICENSE, matched by the files' headers.
    Source("pytorch-vision", "pytorch-vision 0.21.0-3 (Debian; orig tarball)", False,
           "BSD-3-Clause (LICENSE; file headers)",
           debian=(("pool/main/p/pytorch-vision/pytorch-vision_0.21.0.orig.tar.gz",
                    "0a4a967bbb7f9810f792cd0289a07fb98c8fb5d1303fae8b63e3a6b05d720058"),)),
    Source("pytorch-audio", "pytorch-audio 2.6.0-1 (Debian; orig tarball)", False,
           "BSD-2-Clause (LICENSE; cuctc headers BSD, rnnt gpu_kernels.cuh MIT)",
           debian=(("pool/main/p/pytorch-audio/pytorch-audio_2.6.0.orig.tar.gz",
                    "3335d8fcf58c26acf3c628d751103b59226e01c91847ce56efb2a4e7ae8351ef"),)),
    # CCCL: only the tests, examples and benchmarks of Thrust (Apache-2.0) and CUB (BSD-3-Clause), which are
    # ordinary programs using them; the library headers (CuPy ships a copy already) and libcu++ (some of
    # whose files are under the NVIDIA Software License) are left out. Orig tarball only on the mirror.
    Source("cccl", "cccl 2.5.0-1 (Debian; orig tarball)", False,
           "Apache-2.0 (Thrust) and BSD-3-Clause (CUB) (LICENSE, cub/LICENSE.TXT; file headers; libcu++ not taken)",
           include=("*/thrust/testing/*", "*/thrust/examples/*", "*/thrust/benchmarks/*",
                    "*/cub/test/*", "*/cub/examples/*", "*/cub/benchmarks/*"),
           debian=(("pool/main/c/cccl/cccl_2.5.0.orig.tar.gz",
                    "dc548c33178f4bed1d63dfc6b3a39aa3bf6da22a2b46305ec86b9938222634d7"),)),
    # flash-attn: its own CUDA (flash_attn, layer_norm, fused_dense_lib); its vendored CUTLASS (a source
    # already), composable_kernel and flash_attn_ck (AMD/HIP), hopper/ and the one-line per-type
    # instantiation files are left out.
    Source("flash-attn", "flash-attn==2.8.3.post2", True, "BSD-3-Clause (LICENSE, PKG-INFO)",
           "https://pypi.org/project/flash-attn/",
           include=("*/csrc/flash_attn/*", "*/csrc/layer_norm/*", "*/csrc/fused_dense_lib/*"),
           exclude=("*/flash_attn/src/flash_*_hdim*_sm80.cu", "*/layer_norm/ln_*_[0-9]*.cu")),
    # xFormers: its own csrc only (its vendored CUTLASS is left out, and so are the HIP kernels).
    Source("xformers", "xformers==0.0.35", True, "BSD-3-Clause (LICENSE, PKG-INFO)",
           "https://pypi.org/project/xformers/", include=("*/xformers/csrc/*",), exclude=("*/hip_*",)),
    # Held out whole, for benchmarks/builtin_eval.py: ordinary kernels by other authors.
    Source("torch-sparse", "torch-sparse==0.6.18", True, "MIT", "https://pypi.org/project/torch-sparse/", held_out=True),
    Source("auto-gptq", "auto-gptq==0.7.1", True, "MIT", "https://pypi.org/project/auto-gptq/", held_out=True),
    Source("lightgbm", "lightgbm==4.7.0", True, "MIT", "https://pypi.org/project/lightgbm/", held_out=True),
    Source("nerfacc", "nerfacc==0.5.3", True, "MIT", "https://pypi.org/project/nerfacc/", held_out=True),
    Source("torch-cluster", "torch-cluster==1.6.3", True, "MIT", "https://pypi.org/project/torch-cluster/",
           held_out=True),
    Source("causal-conv1d", "causal-conv1d==1.7.0", True, "BSD-3-Clause", "https://pypi.org/project/causal-conv1d/",
           held_out=True),
    # The most ordinary kernels (vector arithmetic, transposes, a tiled matmul, image filters),
    # written by PyCUDA's users for its examples and wiki, as CUDA strings of Python scripts.
    # Files that carry a licence of their own (GPLv3, NVIDIA's SDK licence or EULA) are left out.
    Source("pycuda-examples", "pycuda==2026.1", True, "MIT (PyCUDA; the examples taken carry no other licence)",
           "https://pypi.org/project/pycuda/", held_out=True, python_strings=True, include=("*/examples/*",),
           exclude=("*/convolution.py", "*/game_of_life.py", "*/mandelbrot_interactive.py", "*/sobel_filter.py",
                    "*/demo_cdpSimplePrint.py")),
    # A second set of small ordinary kernels by another author (evaluation only): the reference solutions of mlsys-lab's exercises
    # (the `starter.cu` files next to them are the exercises, with bugs put in on purpose).
    Source("mlsys-lab", "mlsys-lab==0.4.0", True, "MIT", "https://pypi.org/project/mlsys-lab/", held_out=True,
           include=("*/tasks/*/ref.cu",)),
]
GENERATED = Source("generated", "training/corpus/generate_kernels.py (seed 0)", False,
                   "MIT (this project)", "training/corpus/generate_kernels.py")
GENERATED_INLINE = Source("generated-load-inline", "training/corpus/generate_kernels.py (seed 1), in load_inline strings",
                          False, "MIT (this project)", "training/corpus/build_corpus.py")
ORDINARY = Source("ordinary", "training/corpus/ordinary_kernels.py (seed 2)", False, "MIT (this project)",
                  "training/corpus/ordinary_kernels.py")


@dataclass
class CorpusFile:
    source: str
    path: str
    split: str
    text: str


def control_stanza(text: str) -> dict[str, str]:
    """The fields of one Debian control stanza (a package's paragraph of a Sources index);
    continuation lines are kept, one per line."""
    fields: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line[:1] in (" ", "\t") and key:
            fields[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip()
            fields[key] = value.strip()
    return fields


def debian_tarballs(stanza: str, components: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """(pool path, SHA-256) of a source package's upstream `.orig.tar.*`, of the
    `.orig-COMPONENT.tar.*` tarballs named in `components`, and of its `.debian.tar.*`
    (for debian/copyright), from its stanza in a Sources index: how the pins of SOURCES are made."""
    fields = control_stanza(stanza)
    chosen = []
    for line in fields.get("Checksums-Sha256", "").split("\n"):
        if not line.strip():
            continue
        sha, _size, name = line.split()
        match = re.search(r"\.orig(?:-([A-Za-z0-9-]+))?\.tar\.\w+$", name)
        if (match and (match.group(1) is None or match.group(1) in components)) or \
                re.search(r"\.debian\.tar\.\w+$", name):
            chosen.append((f"{fields['Directory']}/{name}", sha))
    return tuple(chosen)


def _wanted_member(name: str) -> bool:
    """The members of a Debian tarball worth unpacking: possible CUDA files, and licence texts."""
    base = name.rsplit("/", 1)[-1].lower()
    return (name.endswith(CUDA_SUFFIXES + HEADER_SUFFIXES) or base.startswith(("license", "copying", "notice"))
            or base == "copyright")


def fetch_debian(source: Source, downloads: Path) -> Path:
    """Download (into downloads/debian-pool, checked against the pinned SHA-256) and unpack one
    Debian source package: the .orig tarballs under downloads/NAME/orig/TARBALL (only possible
    CUDA files and licence texts), the .debian.tar.* under downloads/NAME/debian-packaging
    (its debian/copyright); returns downloads/NAME/orig."""
    unpacked = downloads / source.name
    if (unpacked / "orig").is_dir():
        return unpacked / "orig"
    pool = downloads / "debian-pool"
    pool.mkdir(parents=True, exist_ok=True)
    work = downloads / f"{source.name}.tmp"
    shutil.rmtree(work, ignore_errors=True)
    for path, sha in source.debian:
        archive = pool / path.rsplit("/", 1)[-1]
        if not archive.is_file() or hashlib.sha256(archive.read_bytes()).hexdigest() != sha:
            with urllib.request.urlopen(f"{DEBIAN_MIRROR}/{path}", timeout=300) as response:
                data = response.read()
            if hashlib.sha256(data).hexdigest() != sha:
                raise SystemExit(f"{path}: SHA-256 differs from the pinned one")
            archive.write_bytes(data)
        stem = re.sub(r"\.tar\.\w+$", "", archive.name)
        debian_part = re.search(r"\.debian\.tar\.\w+$", archive.name) is not None
        target = work / ("debian-packaging" if debian_part else f"orig/{stem}")
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and (debian_part or _wanted_member(m.name))]
            tar.extractall(target, members=members, filter="data")
    work.rename(unpacked)
    return unpacked / "orig"


def fetch(source: Source, downloads: Path) -> Path:
    """Download and unpack one package; returns the folder that holds its files.

    Many sdists cannot build their metadata here (CuPy wants cuBLAS headers, others import
    torch or a build backend), which `pip download` insists on, so pip is told not to
    install build requirements (--no-build-isolation: no torch download) and to keep its
    unpacked build folder (--no-clean), and we take the sources from there."""
    if source.debian:
        return fetch_debian(source, downloads)
    unpacked = downloads / source.name
    if unpacked.is_dir():
        return unpacked
    work = downloads / f"{source.name}.tmp"
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(work)]
    pkg = source.requirement.split("==")[0]
    cmd += ["--no-binary", pkg, "--no-clean", "--no-build-isolation"] if source.sdist else ["--only-binary", ":all:"]
    env_tmp = work / "pip-tmp"
    env_tmp.mkdir(exist_ok=True)
    # check=False: for CuPy pip fails after the download (see above); what it left decides.
    subprocess.run(cmd + [source.requirement], env={"TMPDIR": str(env_tmp), "PATH": "/usr/bin:/bin"},
                   capture_output=True, text=True, check=False)
    archives = [p for p in work.iterdir() if p.suffix in (".whl", ".gz", ".zip")]
    unpacked.mkdir()
    if archives:
        archive = archives[0]
        if archive.suffix == ".gz":
            with tarfile.open(archive) as tar:
                tar.extractall(unpacked, filter="data")
        else:
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(unpacked)
    else:
        kept = sorted(p for p in env_tmp.glob("pip-download-*/*") if p.is_dir())
        if not kept:
            raise SystemExit(f"could not fetch {source.requirement}: pip kept no sources")
        kept[0].rename(unpacked / kept[0].name)
    shutil.rmtree(work)
    return unpacked


def is_cuda_file(path: Path, text: str) -> bool:
    if path.suffix in CUDA_SUFFIXES:
        return True
    return path.suffix in HEADER_SUFFIXES and CLEARLY_CUDA.search(text) is not None


def python_cuda_strings(text: str) -> list[str]:
    """The string literals of a Python file that hold a CUDA kernel (`__global__`)."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value]


def collect(root: Path, exclude: tuple[str, ...] = (), include: tuple[str, ...] = (),
            python_strings: bool = False) -> list[tuple[str, str]]:
    """(relative path, text) of every CUDA file under root matching `include` (if given) but
    not `exclude`; with python_strings, of every CUDA string of its Python files instead
    (path `FILE.py#N`)."""
    found = []
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        if include and not any(fnmatch.fnmatch(relative, pattern) for pattern in include):
            continue
        if any(fnmatch.fnmatch(relative, pattern) for pattern in exclude):
            continue
        if python_strings:
            if path.is_file() and path.suffix == ".py" and path.stat().st_size <= MAX_FILE_BYTES:
                strings = python_cuda_strings(path.read_text(encoding="utf-8", errors="replace"))
                found += [(f"{relative}#{n}", code.replace("\r\n", "\n")) for n, code in enumerate(strings)]
            continue
        if not path.is_file() or path.suffix not in CUDA_SUFFIXES + HEADER_SUFFIXES:
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if is_cuda_file(path, text):
            found.append((str(path.relative_to(root)), text.replace("\r\n", "\n")))
    return found


def split_of(source: Source, text: str) -> str:
    """Held-out packages are the test split whole; of the rest, a few percent of the files
    (by a hash of the text) are a validation split for the training loss."""
    if source.held_out:
        return "test"
    digest = int(hashlib.sha1(text.encode()).hexdigest(), 16)
    return "valid" if digest % 100 < VALID_PERCENT else "train"


def in_load_inline(kernel_file: str, rng: random.Random) -> str:
    """A generated kernel file as the CUDA string of a torch.utils.cpp_extension.load_inline
    script, the way KernelBench-style `ModelNew` files carry their CUDA."""
    names = re.findall(r"__global__\s+void\s+(\w+)", kernel_file)
    var = rng.choice(["cuda_source", "cuda_src", "kernel_source", "source"])
    module = rng.choice(["ext", "kernels", "custom_ops", "fused"])
    return (
        "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
        f'{var} = r"""\n{kernel_file.strip()}\n"""\n\n'
        f'{module} = load_inline(\n    name="{module}",\n    cpp_sources="",\n    cuda_sources={var},\n'
        f"    functions={names!r},\n    verbose=False,\n)\n"
    )


def gather(out: Path, generated: int, ordinary: int = 0) -> list[CorpusFile]:
    files: list[CorpusFile] = []
    seen: set[str] = set()

    def add(source: Source, path: str, text: str) -> None:
        key = hashlib.sha1(" ".join(text.split()).encode()).hexdigest()   # whitespace aside
        if key in seen or not text.strip():
            return
        seen.add(key)
        files.append(CorpusFile(source.name, path, split_of(source, text), text))

    # Held-out packages first: a file that is also in a training package stays held out
    # and the training copy is dropped, so no test text is ever trained on.
    for source in sorted(SOURCES, key=lambda s: not s.held_out):
        root = fetch(source, out / "downloads")
        for path, text in collect(root, source.exclude, source.include, source.python_strings):
            add(source, path, text)
    gen_dir = out / "generated"
    if not gen_dir.is_dir() or len(list(gen_dir.glob("*.cu"))) != generated:
        generate(gen_dir, generated, seed=0)
    for path in sorted(gen_dir.glob("*.cu")):
        add(GENERATED, path.name, path.read_text())
    inline_dir = out / "generated_inline"
    if not inline_dir.is_dir() or len(list(inline_dir.glob("*.cu"))) != generated // 4:
        generate(inline_dir, generated // 4, seed=1)
    rng = random.Random(1)
    for path in sorted(inline_dir.glob("*.cu")):
        add(GENERATED_INLINE, path.with_suffix(".py").name, in_load_inline(path.read_text(), rng))
    ordinary_dir = out / "ordinary"
    if ordinary and (not ordinary_dir.is_dir() or len(list(ordinary_dir.glob("ord_*"))) != ordinary):
        shutil.rmtree(ordinary_dir, ignore_errors=True)
        generate_ordinary(ordinary_dir, ordinary, seed=2)
    for path in sorted(ordinary_dir.glob("ord_*")) if ordinary else []:
        add(ORDINARY, path.name, path.read_text())
    return files


# --- line structure, for fill-in-the-middle spans on line boundaries -----------------

def line_spans(text: str) -> list[tuple[int, int, int]]:
    """(start, first non-blank, end) character offsets of each line, end before '\\n'."""
    spans, pos = [], 0
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" \t"))
        spans.append((pos, pos + indent, pos + len(line)))
        pos += len(line) + 1
    return spans


def brace_blocks(text: str) -> list[tuple[int, int]]:
    """(opening line, closing line) of `{ ... }` blocks whose `{` ends its line and whose
    `}` starts its line: loop bodies, if bodies, function bodies. Braces in comments and
    strings are rare enough in this corpus to ignore."""
    stack, blocks = [], []
    for number, line in enumerate(text.split("\n")):
        code = line.split("//")[0]
        for ch in code:
            if ch == "{":
                stack.append((number, code.rstrip().endswith("{")))
            elif ch == "}" and stack:
                opened, ends_line = stack.pop()
                if ends_line and code.strip().startswith("}") and number > opened + 1:
                    blocks.append((opened, number))
    return blocks


def write_split_data(files: list[CorpusFile], out: Path) -> None:
    """OUT/data/{split}_texts.json (the file texts) and {split}_lines.npy (char offsets of each
    line's start, first non-blank character and end), {split}_blocks.npy (opening and
    closing line of each block), {split}_files.npy (each file's first line and block)."""
    data_dir = out / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        chosen = [f for f in files if f.split == split]
        lines, blocks, index = [], [], []
        for f in chosen:
            index.append((len(lines), len(blocks)))
            lines.extend(line_spans(f.text))
            blocks.extend(brace_blocks(f.text))
        (data_dir / f"{split}_texts.json").write_text(json.dumps([f.text for f in chosen]))
        np.save(data_dir / f"{split}_lines.npy", np.array(lines, dtype=np.int32).reshape(-1, 3))
        np.save(data_dir / f"{split}_blocks.npy", np.array(blocks, dtype=np.int32).reshape(-1, 2))
        np.save(data_dir / f"{split}_files.npy", np.array(index, dtype=np.int32).reshape(-1, 2))


def count_tokens(files: list[CorpusFile], tokenizer) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f, enc in zip(files, tokenizer.encode_batch([f.text for f in files], add_special_tokens=False)):
        counts[f.source] = counts.get(f.source, 0) + len(enc.ids)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(".corpus"))
    ap.add_argument("--generated", type=int, default=4000, help="generated kernel files")
    ap.add_argument("--ordinary", type=int, default=30000, help="ordinary kernel files (training/corpus/ordinary_kernels.py)")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--reindex", action="store_true",
                    help="only rewrite OUT/data's line and block arrays from its *_texts.json (a corpus carried "
                         "to another machine as texts alone)")
    ap.add_argument("--tokenizer", type=Path,
                    help="keep this folder's tokenizer (tokenizer.json) instead of training one: the corpus of a "
                         "model that is trained further, e.g. engine/builtin")
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.reindex:
        write_split_data([CorpusFile("", "", split, text) for split in ("train", "valid", "test")
                          for text in json.loads((out / "data" / f"{split}_texts.json").read_text())], out)
        return

    files = gather(out, args.generated, args.ordinary)
    with open(out / "files.jsonl", "w") as fh:
        fh.writelines(json.dumps(asdict(f)) + "\n" for f in files)
    if args.tokenizer:
        from tokenizers import Tokenizer

        (out / "tokenizer").mkdir(parents=True, exist_ok=True)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(args.tokenizer / name, out / "tokenizer" / name)
        tokenizer = Tokenizer.from_file(str(out / "tokenizer" / "tokenizer.json"))
    else:
        tokenizer = build_tokenizer((f.text for f in files if f.split == "train"), args.vocab)
        save_tokenizer(tokenizer, out / "tokenizer")
    write_split_data(files, out)
    tokens = count_tokens(files, tokenizer)

    stats = []
    for source in SOURCES + [GENERATED, GENERATED_INLINE, ORDINARY]:
        mine = [f for f in files if f.source == source.name]
        stats.append({
            **asdict(source),
            "files": len(mine),
            "test_files": sum(f.split == "test" for f in mine),
            "valid_files": sum(f.split == "valid" for f in mine),
            "bytes": sum(len(f.text.encode()) for f in mine),
            "tokens": tokens.get(source.name, 0),
        })
    (out / "stats.json").write_text(json.dumps(stats, indent=1))
    for s in stats:
        print(f"{s['name']:>15}: {s['files']:5d} files ({s['test_files']} test), "
              f"{s['bytes'] / 1e6:6.2f} MB, {s['tokens'] / 1e6:5.2f} M tokens  [{s['licence']}]")


if __name__ == "__main__":
    main()
