#include "textflag.h"

// func ends(p unsafe.Pointer, last uintptr)
TEXT ·ends(SB), NOSPLIT|NOFRAME, $0-16
	MOVD	p+0(FP), R0
	MOVD	last+8(FP), R1
	PRFM	(R0), PSTL1KEEP
	ADD	R1, R0
	PRFM	(R0), PSTL1KEEP
	RET
