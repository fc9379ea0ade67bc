"""The Xilinx xDNN target: ONNX CNNs to XN* command lists, a CSR script image, an IMEM map and a
16-bit filter image, with a decoder and a functional model (see docs/xdnn.md)."""
