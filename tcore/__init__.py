"""tcore: the golden model's front ends for other libraries.

``tcore.torch`` (the ``torch`` extra, ``pip install -e '.[torch]'``): PyTorch's GEMMs on CPU
tensors with the bits an H200 returns (``docs/torch.md``).  It is not imported here, so that
``import tcore`` works without PyTorch.
"""
