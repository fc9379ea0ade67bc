"""Training defaults, in one place for the command line, `TrainArgs` and `TrainConfig`."""

EPOCHS = 15
BATCH_SIZE = 64
LEARNING_RATE = 3e-3
OPTIMIZER = "adam"
WEIGHT_DECAY = 0.0
DEVICE = "MAX78000"
CLASSIFICATION_LOSS = "ce"  # cross-entropy, for class labels
REGRESSION_LOSSES = ("mse", "l1", "smoothl1", "cosine")  # for target vectors (regression.py)
LOSSES = (CLASSIFICATION_LOSS, *REGRESSION_LOSSES)
DEFAULT_REGRESSION_LOSS = "mse"
