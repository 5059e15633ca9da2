"""Model zoo: image classifiers built in the tf_keras functional style."""
