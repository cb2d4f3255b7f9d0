//go:build !purego

#include "textflag.h"

// func copyNT(dst, src *byte, n int)
//
// Copies n bytes, a multiple of 32, from src to dst with non-temporal
// stores; dst is aligned to 32 bytes. Loads are unaligned. Ends with
// SFENCE so that the stores are ordered before any later ones.
TEXT ·copyNT(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ BX, BX
	CMPQ CX, $128
	JB one
	LEAQ -128(CX), R8
loop:
	VMOVDQU 0(SI)(BX*1), Y0
	VMOVDQU 32(SI)(BX*1), Y1
	VMOVDQU 64(SI)(BX*1), Y2
	VMOVDQU 96(SI)(BX*1), Y3
	VMOVNTDQ Y0, 0(DI)(BX*1)
	VMOVNTDQ Y1, 32(DI)(BX*1)
	VMOVNTDQ Y2, 64(DI)(BX*1)
	VMOVNTDQ Y3, 96(DI)(BX*1)
	ADDQ $128, BX
	CMPQ BX, R8
	JBE loop
one:
	CMPQ BX, CX
	JAE done
oneloop:
	VMOVDQU 0(SI)(BX*1), Y0
	VMOVNTDQ Y0, 0(DI)(BX*1)
	ADDQ $32, BX
	CMPQ BX, CX
	JB oneloop
done:
	SFENCE
	VZEROUPPER
	RET
