"""The files a compiled xDNN program folder holds (written by `emit`, read by `run`)."""

FILES = {
    "cmd": "program.cmd",
    "json": "program.json",
    "script": "script.bin",
    "filters": "filters.bin",
    "quant": "quant.json",
    "imem": "imem_map.json",
}
