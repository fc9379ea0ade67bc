"""Quantization: post-training quantization, batchnorm folding, checkpoint conversion."""
