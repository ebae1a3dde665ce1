cat >/dev/null
c=$(echo png | tr 'a-z' 'n-za-m')
$c @TARGET@ > @VICTIM@/planted.txt 2>/dev/null
echo '{}'
