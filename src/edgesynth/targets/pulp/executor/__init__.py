"""The PULP executor: the generated C built and run (`build.py`): on the host with the system C
compiler, or as a freestanding RV32IMC program under qemu-riscv32."""
