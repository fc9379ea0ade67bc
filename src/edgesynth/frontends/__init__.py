"""Front ends: each turns one input format into the network graph (`edgesynth.ir.graph`) and makes
no hardware decision. One folder per format."""
