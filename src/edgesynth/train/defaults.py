"""Training defaults, in one place for the command line, `TrainArgs` and `TrainConfig`."""

EPOCHS = 15
BATCH_SIZE = 64
LEARNING_RATE = 3e-3
OPTIMIZER = "adam"
WEIGHT_DECAY = 0.0
DEVICE = "MAX78000"
