#include "textflag.h"

// func ends(p unsafe.Pointer, last uintptr)
TEXT ·ends(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	p+0(FP), AX
	MOVQ	last+8(FP), BX
	PREFETCHT0	(AX)
	PREFETCHT0	(AX)(BX*1)
	RET
