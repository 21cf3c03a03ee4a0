package shacrypt

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// knownHashes were made by Python 3.11's crypt.crypt on Debian 12
// (libxcrypt); the first five inputs are the specification's own.
var knownHashes = []struct {
	alg      Algorithm
	pw, salt string
	want     string
}{
	{SHA256, "Hello world!", "saltstring", "$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5"},
	{SHA512, "Hello world!", "saltstring", "$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1"},
	{SHA256, "Hello world!", "rounds=10000$saltstringsaltstring", "$5$rounds=10000$saltstringsaltst$3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA"},
	{SHA512, "Hello world!", "rounds=10000$saltstringsaltstring", "$6$rounds=10000$saltstringsaltst$OW1/O6BYHV6BcXZu8QVeXbDWra3Oeqh0sbHbbMCVNSnCM/UrjmM0Dp8vOuZeHBy/YTBmSK6H9qs/y3RnOaw5v."},
	{SHA256, "This is just a test", "rounds=5000$toolongsaltstring", "$5$rounds=5000$toolongsaltstrin$Un/5jzAHMgOGZ5.mWJpuVolil07guHPvOW8mGRcvxa5"},
	{SHA512, "This is just a test", "rounds=5000$toolongsaltstring", "$6$rounds=5000$toolongsaltstrin$lQ8jolhgVRVhY4b5pZKaysCLi0QBxGoNeKQzQ3glMhwllF7oGDZxUhx1yxdYcz/e1JSbq3y6JMxxl8audkUEm0"},
	{SHA256, "we have a short salt string but not a short password", "rounds=77777$short", "$5$rounds=77777$short$JiO1O3ZpDAxGJeaDIuqCoEFysAe1mZNJRs3pw0KQRd/"},
	{SHA512, "we have a short salt string but not a short password", "rounds=77777$short", "$6$rounds=77777$short$WuQyW2YR.hBNpjjRhpYD/ifIw05xdfeEyQoMxIXbkvr0gge1a1x3yRULJ5CCaUeOxFmtlcGZelFl5CxtgfiAc0"},
	{SHA256, "a very much longer text to encrypt.  This one even stretches over morethan one line.", "rounds=1400$anotherlongsaltstring", "$5$rounds=1400$anotherlongsalts$Rx.j8H.h8HjEDGomFU8bDkXm3XIUnzyxf12oP84Bnq1"},
	{SHA512, "a very much longer text to encrypt.  This one even stretches over morethan one line.", "rounds=1400$anotherlongsaltstring", "$6$rounds=1400$anotherlongsalts$POfYwTEok97VWcjxIiSOjiykti.o/pQs.wPvMxQ6Fm7I6IoYN3CmLs66x9t0oSwbtEW7o7UmJEiDwGqd8p4ur1"},
	{SHA256, "", "abc", "$5$abc$bBHLwRRW2Li0XKaX13kz/g2fkDil4Jx46aNvd.48MS8"},
	{SHA512, "", "abc", "$6$abc$mJP3a6FyA8uCnzRtlnNypPwjnvpi5TP9qOrInzrfDmwxUQG38PkpCPdqfTb8JQfAngapMxeim4AZ..hSdRRzD."},
	{SHA256, "x", "$5$rounds=1000$x", "$5$rounds=1000$x$w7TMLiJJk/HQIdyS/Eli4ow2pJwkTkM.n1SunDyImw5"},
	{SHA512, "x", "$6$rounds=1000$x$ignored", "$6$rounds=1000$x$TtpmgdBL9IRMyiEXdo4W2VQXWYt4mFxFejWYXSuRT6horaARFY0AbH.ESH6NH4Nlur7cjsn6rYnTiuzkHOhzt."},
}

func TestHashWithSaltKnownHashes(t *testing.T) {
	for _, k := range knownHashes {
		got, err := HashWithSalt(k.alg, k.pw, k.salt)
		if err != nil {
			t.Fatalf("%s %q %q: %v", k.alg, k.pw, k.salt, err)
		}
		if got != k.want {
			t.Errorf("%s %q %q:\n got %s\nwant %s", k.alg, k.pw, k.salt, got, k.want)
		}
	}
}

func TestHashWithSaltRefuses(t *testing.T) {
	if _, err := HashWithSalt("md5", "pw", "salt"); !errors.Is(err, ErrAlgorithm) {
		t.Errorf("md5: %v, want ErrAlgorithm", err)
	}
	for _, salt := range []string{"rounds=10$low", "rounds=1000000000$high", "rounds=x$salt", "rounds=5000"} {
		if _, err := HashWithSalt(SHA256, "pw", salt); err == nil {
			t.Errorf("salt %q accepted", salt)
		}
	}
}

// TestHashFormat checks Hash's shape (prefix, a 16-character salt of
// crypt's alphabet, the digest's length) and that two hashes of one
// password differ (a fresh salt each time) yet each verifies.
func TestHashFormat(t *testing.T) {
	for alg, digestLen := range map[Algorithm]int{SHA256: 43, SHA512: 86} {
		a, err := Hash(alg, "pw")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Hash(alg, "pw")
		if a == b {
			t.Errorf("%s: two hashes of one password are equal: %s", alg, a)
		}
		parts := strings.Split(a, "$")
		if len(parts) != 4 || parts[0] != "" || len(parts[2]) != 16 || len(parts[3]) != digestLen {
			t.Fatalf("%s: hash %q: want $id$<16-character salt>$<%d characters>", alg, a, digestLen)
		}
		if strings.Trim(parts[2], saltAlphabet) != "" {
			t.Errorf("%s: salt %q outside crypt's alphabet", alg, parts[2])
		}
		again, err := HashWithSalt(alg, "pw", a)
		if err != nil || again != a {
			t.Errorf("%s: rehashing with the hash as salt gave %q, %v; want %q", alg, again, err, a)
		}
	}
}

// TestHashAgainstOpenSSL checks random salts against openssl passwd,
// another implementation, when it is installed.
func TestHashAgainstOpenSSL(t *testing.T) {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	for _, alg := range Algorithms() {
		for _, pw := range []string{"rescue-pw", "a password longer than thirty-two bytes, and than sixty-four bytes too: the blocks", "ü"} {
			h, err := Hash(alg, pw)
			if err != nil {
				t.Fatal(err)
			}
			salt := strings.Split(h, "$")[2]
			flag := map[Algorithm]string{SHA256: "-5", SHA512: "-6"}[alg]
			cmd := exec.Command(bin, "passwd", flag, "-salt", salt, "-stdin")
			cmd.Stdin = strings.NewReader(pw + "\n")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("openssl passwd: %v", err)
			}
			if got := strings.TrimSpace(string(out)); got != h {
				t.Errorf("%s %q: openssl %s, we %s", alg, pw, got, h)
			}
		}
	}
}
