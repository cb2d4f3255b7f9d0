//go:build ignore

// gen_simd writes simd_amd64.s and simd_decl_amd64.go, the AVX2 and F16C
// reduction kernels and their Go declarations. Run it with go generate.
//
// Every kernel has the signature
//
//	func k(dst, a, b *byte, n int, nt bool)
//
// and sets dst = a ⊕ b over n bytes, a multiple of 32 (one vector). With
// nt set it writes dst with non-temporal stores, which need dst aligned to
// 32 bytes, and ends with SFENCE so that the stores are ordered before any
// later ones. The loads are unaligned. dst may be exactly a or b: each
// vector's operands are loaded before its result is stored.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"log"
	"os"
	"strings"
)

// vecBytes is the width of one AVX2 vector.
const vecBytes = 32

// kernel describes one generated function.
type kernel struct {
	name   string
	doc    string
	unroll int      // vectors per iteration of the main loop
	consts []string // instructions that set up constant registers
	// body emits the instructions for the vector at byte offset off,
	// using the temporary registers t, and stores the result with st.
	body func(w *writer, off int, t []string, st storeFunc)
	// temps is how many temporary Y registers body needs per vector.
	temps int
}

// storeFunc emits the store of vector register reg to dst at byte
// offset off.
type storeFunc func(reg string, off int)

type writer struct{ bytes.Buffer }

func (w *writer) ins(format string, args ...any) {
	fmt.Fprintf(w, "\t"+format+"\n", args...)
}

func (w *writer) label(l string) { fmt.Fprintf(w, "%s:\n", l) }

// Constant registers, shared by the kernels that need them; the
// temporaries are allocated from Y0 upwards.
const (
	cNaN   = "Y15" // canonical NaN of the element type
	cAbs   = "Y14" // 16-bit magnitude mask 0x7fff
	cInf   = "Y13" // 16-bit +Inf encoding
	cHi    = "Y15" // 0xffff0000 in every 32-bit lane
	cRnd   = "Y14" // 0x00007fff in every 32-bit lane
	cOne   = "Y13" // 0x00000001 in every 32-bit lane
	cQuiet = "Y12" // 0x00400000 in every 32-bit lane: the bfloat16 quiet bit in float32 position
)

// broadcast32 and friends load a constant into every lane of a register.
func broadcast32(reg string, v uint32) string {
	return fmt.Sprintf("MOVL $0x%x, AX; VMOVD AX, X%s; VPBROADCASTD X%[2]s, %s", v, reg[1:], reg)
}

func broadcast16(reg string, v uint16) string {
	return fmt.Sprintf("MOVL $0x%x, AX; VMOVD AX, X%s; VPBROADCASTW X%[2]s, %s", v, reg[1:], reg)
}

func broadcast64(reg string, v uint64) string {
	return fmt.Sprintf("MOVQ $0x%x, AX; VMOVQ AX, X%s; VPBROADCASTQ X%[2]s, %s", v, reg[1:], reg)
}

// simple is a kernel of one instruction per vector, with b's vector as a
// memory operand: integer add, multiply, min and max, and float add and
// multiply. For the floats a is the first source operand, as in the
// scalar kernels' x + y.
func simple(name, doc, insn string) kernel {
	return kernel{
		name: name, doc: doc, unroll: 4, temps: 1,
		body: func(w *writer, off int, t []string, st storeFunc) {
			w.ins("VMOVDQU %d(SI)(BX*1), %s", off, t[0])
			w.ins("%s %d(DX)(BX*1), %s, %s", insn, off, t[0], t[0])
			st(t[0], off)
		},
	}
}

// floatMinMax is Min or Max on float32 (sfx "PS") or float64 ("PD") with
// the package's semantics. VMINPS gives a when a < b and b otherwise,
// which is right except for pairs of equal values, where the bits are
// identical except for ±0, and for NaNs. Equal pairs take a|b for Min
// (-0 wins) and a&b for Max (+0 wins); unordered pairs take the canonical
// NaN.
func floatMinMax(name, doc, sfx string, isMin bool, nan uint64) kernel {
	k := kernel{name: name, doc: doc, unroll: 2, temps: 4}
	if sfx == "PS" {
		k.consts = []string{broadcast32(cNaN, uint32(nan))}
	} else {
		k.consts = []string{broadcast64(cNaN, nan)}
	}
	k.body = func(w *writer, off int, t []string, st storeFunc) {
		a, b, m, e := t[0], t[1], t[2], t[3]
		w.ins("VMOVUP%s %d(SI)(BX*1), %s", sfx[1:], off, a)
		w.ins("VMOVUP%s %d(DX)(BX*1), %s", sfx[1:], off, b)
		if isMin {
			w.ins("VMIN%s %s, %s, %s", sfx, b, a, m)
			w.ins("VCMP%s $0, %s, %s, %s", sfx, b, a, e) // EQ_OQ
			w.ins("VAND%s %s, %s, %s", sfx, a, e, e)
			w.ins("VOR%s %s, %s, %s", sfx, e, m, m)
		} else {
			w.ins("VMAX%s %s, %s, %s", sfx, b, a, m)
			w.ins("VCMP%s $4, %s, %s, %s", sfx, b, a, e) // NEQ_UQ
			w.ins("VOR%s %s, %s, %s", sfx, a, e, e)
			w.ins("VAND%s %s, %s, %s", sfx, e, m, m)
		}
		w.ins("VCMP%s $3, %s, %s, %s", sfx, b, a, e) // UNORD_Q
		w.ins("VBLENDV%s %s, %s, %s, %s", sfx, e, cNaN, m, m)
		st(m, off)
	}
	return k
}

// halfMinMax is Min or Max on binary16 or bfloat16, whose encodings are
// sign and magnitude. Flipping the magnitude bits of the negative ones
// gives 16-bit integers in the order of the values, with -0 just below
// +0, so a signed integer min or max picks the right operand, ±0
// included; the same flip maps the result back. A lane with a magnitude
// above +Inf's in either operand is a NaN and takes the canonical NaN.
func halfMinMax(name, doc string, isMin bool, inf, nan uint16) kernel {
	insn := "VPMAXSW"
	if isMin {
		insn = "VPMINSW"
	}
	return kernel{
		name: name, doc: doc, unroll: 2, temps: 4,
		consts: []string{broadcast16(cNaN, nan), broadcast16(cAbs, 0x7fff), broadcast16(cInf, inf)},
		body: func(w *writer, off int, t []string, st storeFunc) {
			a, b, x, n := t[0], t[1], t[2], t[3]
			w.ins("VMOVDQU %d(SI)(BX*1), %s", off, a)
			w.ins("VMOVDQU %d(DX)(BX*1), %s", off, b)
			w.ins("VPAND %s, %s, %s", cAbs, a, x)
			w.ins("VPCMPGTW %s, %s, %s", cInf, x, n) // |a| > inf
			w.ins("VPAND %s, %s, %s", cAbs, b, x)
			w.ins("VPCMPGTW %s, %s, %s", cInf, x, x) // |b| > inf
			w.ins("VPOR %s, %s, %s", x, n, n)
			flip := func(r string) {
				w.ins("VPSRAW $15, %s, %s", r, x)
				w.ins("VPSRLW $1, %s, %s", x, x)
				w.ins("VPXOR %s, %s, %s", x, r, r)
			}
			flip(a)
			flip(b)
			w.ins("%s %s, %s, %s", insn, b, a, a)
			flip(a)
			w.ins("VPBLENDVB %s, %s, %s, %s", n, cNaN, a, a)
			st(a, off)
		},
	}
}

// f16Arith is Sum or Prod on binary16 with F16C: each half of the vector
// is widened to eight float32s, combined, and rounded back to nearest
// even (VCVTPS2PH immediate 0), which is what F16FromF32 does.
func f16Arith(name, doc, insn string) kernel {
	return kernel{
		name: name, doc: doc, unroll: 2, temps: 3,
		body: func(w *writer, off int, t []string, st storeFunc) {
			lo, hi, b := t[0], t[1], t[2]
			w.ins("VCVTPH2PS %d(SI)(BX*1), %s", off, lo)
			w.ins("VCVTPH2PS %d(DX)(BX*1), %s", off, b)
			w.ins("%s %s, %s, %s", insn, b, lo, lo)
			w.ins("VCVTPH2PS %d(SI)(BX*1), %s", off+16, hi)
			w.ins("VCVTPH2PS %d(DX)(BX*1), %s", off+16, b)
			w.ins("%s %s, %s, %s", insn, b, hi, hi)
			w.ins("VCVTPS2PH $0, %s, X%s", lo, lo[1:])
			w.ins("VCVTPS2PH $0, %s, X%s", hi, hi[1:])
			w.ins("VINSERTI128 $1, X%s, %s, %s", hi[1:], lo, lo)
			st(lo, off)
		},
	}
}

// bf16Arith is Sum or Prod on bfloat16. A bfloat16 is the top half of a
// float32, so shifting each 32-bit lane left by 16 widens the even
// elements and masking off the low half widens the odd ones. The results
// round to nearest even as BF16FromF32 does: add 0x7fff plus the lowest
// kept bit and drop the low half; a NaN instead just gets its quiet bit.
// Rounding works on the 32-bit lanes, and a word blend packs the two
// halves' results into one vector.
func bf16Arith(name, doc, insn string) kernel {
	return kernel{
		name: name, doc: doc, unroll: 2, temps: 4,
		consts: []string{broadcast32(cHi, 0xffff0000), broadcast32(cRnd, 0x7fff),
			broadcast32(cOne, 1), broadcast32(cQuiet, 0x00400000)},
		body: func(w *writer, off int, t []string, st storeFunc) {
			odd, b, even, x := t[0], t[1], t[2], t[3]
			w.ins("VMOVDQU %d(SI)(BX*1), %s", off, odd)
			w.ins("VMOVDQU %d(DX)(BX*1), %s", off, b)
			w.ins("VPSLLD $16, %s, %s", odd, even)
			w.ins("VPSLLD $16, %s, %s", b, x)
			w.ins("%s %s, %s, %s", insn, x, even, even)
			w.ins("VPAND %s, %s, %s", cHi, odd, odd)
			w.ins("VPAND %s, %s, %s", cHi, b, b)
			w.ins("%s %s, %s, %s", insn, b, odd, odd)
			round := func(s string) { // uses b and x
				w.ins("VPSRLD $16, %s, %s", s, x)
				w.ins("VPAND %s, %s, %s", cOne, x, x)
				w.ins("VPADDD %s, %s, %s", cRnd, x, x)
				w.ins("VPADDD %s, %s, %s", s, x, x) // s rounded, in the high half
				w.ins("VCMPPS $3, %s, %s, %s", s, s, b)
				w.ins("VPOR %s, %s, %s", cQuiet, s, s)
				w.ins("VBLENDVPS %s, %s, %s, %s", b, s, x, s)
			}
			round(even)
			round(odd)
			// The odd results are in place in the high halves; the even
			// ones move down and fill the low halves.
			w.ins("VPSRLD $16, %s, %s", even, even)
			w.ins("VPBLENDW $0xaa, %s, %s, %s", odd, even, odd)
			st(odd, off)
		},
	}
}

var kernels = []kernel{
	simple("vaddB", "8-bit integer Sum", "VPADDB"),
	simple("vaddD", "32-bit integer Sum", "VPADDD"),
	simple("vaddQ", "64-bit integer Sum", "VPADDQ"),
	simple("vmulD", "32-bit integer Prod (the low 32 bits of the product, signed or not)", "VPMULLD"),
	simple("vminSB", "int8 Min", "VPMINSB"),
	simple("vmaxSB", "int8 Max", "VPMAXSB"),
	simple("vminUB", "uint8 Min", "VPMINUB"),
	simple("vmaxUB", "uint8 Max", "VPMAXUB"),
	simple("vminSD", "int32 Min", "VPMINSD"),
	simple("vmaxSD", "int32 Max", "VPMAXSD"),
	simple("vminUD", "uint32 Min", "VPMINUD"),
	simple("vmaxUD", "uint32 Max", "VPMAXUD"),
	simple("vaddF32", "float32 Sum", "VADDPS"),
	simple("vmulF32", "float32 Prod", "VMULPS"),
	simple("vaddF64", "float64 Sum", "VADDPD"),
	simple("vmulF64", "float64 Prod", "VMULPD"),
	floatMinMax("vminF32", "float32 Min", "PS", true, 0x7fc00000),
	floatMinMax("vmaxF32", "float32 Max", "PS", false, 0x7fc00000),
	floatMinMax("vminF64", "float64 Min", "PD", true, 0x7ff8000000000000),
	floatMinMax("vmaxF64", "float64 Max", "PD", false, 0x7ff8000000000000),
	halfMinMax("vminF16", "binary16 Min", true, 0x7c00, 0x7e00),
	halfMinMax("vmaxF16", "binary16 Max", false, 0x7c00, 0x7e00),
	halfMinMax("vminBF16", "bfloat16 Min", true, 0x7f80, 0x7fc0),
	halfMinMax("vmaxBF16", "bfloat16 Max", false, 0x7f80, 0x7fc0),
	f16Arith("vaddF16", "binary16 Sum; needs F16C", "VADDPS"),
	f16Arith("vmulF16", "binary16 Prod; needs F16C", "VMULPS"),
	bf16Arith("vaddBF16", "bfloat16 Sum", "VADDPS"),
	bf16Arith("vmulBF16", "bfloat16 Prod", "VMULPS"),
}

func (k kernel) emit(w *writer) {
	if k.unroll*k.temps > 12 {
		log.Fatalf("%s: %d temporaries collide with the constants", k.name, k.unroll*k.temps)
	}
	fmt.Fprintf(w, "// func %s(dst, a, b *byte, n int, nt bool)\n", k.name)
	fmt.Fprintf(w, "TEXT ·%s(SB), NOSPLIT, $0-33\n", k.name)
	w.ins("MOVQ dst+0(FP), DI")
	w.ins("MOVQ a+8(FP), SI")
	w.ins("MOVQ b+16(FP), DX")
	w.ins("MOVQ n+24(FP), CX")
	for _, c := range k.consts {
		for _, ins := range strings.Split(c, "; ") {
			w.ins("%s", ins)
		}
	}
	w.ins("CMPB nt+32(FP), $0")
	w.ins("JNE nontemporal")
	k.loops(w, "", func(reg string, off int) { w.ins("VMOVDQU %s, %d(DI)(BX*1)", reg, off) })
	w.ins("VZEROUPPER")
	w.ins("RET")
	w.label("nontemporal")
	k.loops(w, "nt", func(reg string, off int) { w.ins("VMOVNTDQ %s, %d(DI)(BX*1)", reg, off) })
	w.ins("SFENCE")
	w.ins("VZEROUPPER")
	w.ins("RET")
	w.WriteString("\n")
}

// loops emits the unrolled main loop and the one-vector loop for the
// remainder, falling through at the end; labels get the prefix p.
func (k kernel) loops(w *writer, p string, st storeFunc) {
	step := k.unroll * vecBytes
	regs := func(i int) []string {
		t := make([]string, k.temps)
		for j := range t {
			t[j] = fmt.Sprintf("Y%d", i*k.temps+j)
		}
		return t
	}
	w.ins("XORQ BX, BX")
	w.ins("CMPQ CX, $%d", step)
	w.ins("JB %sone", p)
	w.ins("LEAQ -%d(CX), R8", step) // last start of a full iteration
	w.label(p + "loop")
	for i := range k.unroll {
		k.body(w, i*vecBytes, regs(i), st)
	}
	w.ins("ADDQ $%d, BX", step)
	w.ins("CMPQ BX, R8")
	w.ins("JBE %sloop", p)
	w.label(p + "one")
	w.ins("CMPQ BX, CX")
	w.ins("JAE %sdone", p)
	w.label(p + "oneloop")
	k.body(w, 0, regs(0), st)
	w.ins("ADDQ $%d, BX", vecBytes)
	w.ins("CMPQ BX, CX")
	w.ins("JB %soneloop", p)
	w.label(p + "done")
}

const header = "// Code generated by gen_simd.go; DO NOT EDIT.\n\n"

func main() {
	var asm writer
	asm.WriteString(header)
	asm.WriteString("//go:build !purego\n\n#include \"textflag.h\"\n\n")
	var decl writer
	decl.WriteString(header)
	decl.WriteString("//go:build !purego\n\npackage reduce\n\n")
	for _, k := range kernels {
		k.emit(&asm)
		fmt.Fprintf(&decl, "// %s is the vector kernel for %s.\n//\n//go:noescape\nfunc %s(dst, a, b *byte, n int, nt bool)\n\n",
			k.name, k.doc, k.name)
	}
	src, err := format.Source(decl.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("simd_amd64.s", asm.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("simd_decl_amd64.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
}
