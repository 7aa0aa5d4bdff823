"""SimCSE with any cl-plugins temperature strategy: model, training, patching, evaluation."""
