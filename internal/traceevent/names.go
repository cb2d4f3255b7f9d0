package traceevent

import (
	"path/filepath"
	"strconv"
	"strings"
)

// RankFile is the file rank writes for the pattern of HCOMM_TRACE: "%r"
// replaced by the rank, or else ".rankN" added before the extension
// (job.json → job.rank3.json).
func RankFile(pattern string, rank int) string {
	r := strconv.Itoa(rank)
	if strings.Contains(pattern, "%r") {
		return strings.ReplaceAll(pattern, "%r", r)
	}
	ext := filepath.Ext(pattern)
	return strings.TrimSuffix(pattern, ext) + ".rank" + r + ext
}

// JobFile is the file the ranks' files of pattern are merged into: the
// pattern itself (job.json), or with "%r" replaced by "all".
func JobFile(pattern string) string {
	return strings.ReplaceAll(pattern, "%r", "all")
}
