touch hostile.ran
