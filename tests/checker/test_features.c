/*
 * tests/checker/test_features.c - the feature table (checker/features.c):
 * its rows are well formed, and chk_feature_missing names every bit of all
 * three words as the table says.  With --list, prints the rows for
 * tests/integration/features.sh, which checks the driver's gate and
 * recon-check against them on real images.
 */
#include "checker.h"

#include <stdio.h>
#include <string.h>

static int failures;

#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); printf("\n"); failures++; } while (0)

static const char *const word_names[] = { "compat", "ro_compat", "incompat" };

static const struct chk_feature *row_of(int word, uint32_t bit)
{
	size_t n;
	const struct chk_feature *t = chk_features(&n);
	for (size_t i = 0; i < n; i++)
		if ((int)t[i].word == word && t[i].mask == bit)
			return &t[i];
	return NULL;
}

static void check_rows(void)
{
	size_t n;
	const struct chk_feature *t = chk_features(&n);
	for (size_t i = 0; i < n; i++) {
		if (!t[i].mask || (t[i].mask & (t[i].mask - 1)))
			FAIL("%s: mask 0x%x is not one bit", t[i].name, t[i].mask);
		for (size_t j = 0; j < i; j++) {
			if (t[j].word == t[i].word && t[j].mask == t[i].mask)
				FAIL("%s and %s: the same bit", t[j].name, t[i].name);
			if (!strcmp(t[j].name, t[i].name))
				FAIL("%s: two rows", t[i].name);
		}
	}
}

/* Each bit alone, under each need: named as its row says, or as unknown. */
static void check_bits(void)
{
	static const unsigned needs[] = { CHK_NEED_WRITTEN, CHK_NEED_MODELLED,
					  CHK_NEED_WRITTEN | CHK_NEED_MODELLED };
	for (int w = CHK_COMPAT; w <= CHK_INCOMPAT; w++) {
		for (int b = 0; b < 32; b++) {
			uint32_t words[3] = { 0, 0, 0 };
			words[w] = 1u << b;
			const struct chk_feature *f = row_of(w, 1u << b);
			for (size_t k = 0; k < sizeof(needs) / sizeof(needs[0]); k++) {
				char buf[64] = "";
				const char *got = chk_feature_missing(words, needs[k], buf, sizeof(buf));
				bool ok = f && (!(needs[k] & CHK_NEED_WRITTEN) || f->written) &&
					  (!(needs[k] & CHK_NEED_MODELLED) || f->modelled);
				char hex[16];
				snprintf(hex, sizeof(hex), "0x%x", 1u << b);
				if (ok && got)
					FAIL("%s bit 0x%x (%s), need %u: refused as %s", word_names[w],
					     1u << b, f->name, needs[k], got);
				else if (!ok && !got)
					FAIL("%s bit 0x%x, need %u: not refused", word_names[w], 1u << b,
					     needs[k]);
				else if (!ok && f && strcmp(got, f->name))
					FAIL("%s bit 0x%x: named %s, want %s", word_names[w], 1u << b,
					     got, f->name);
				else if (!ok && !f && (got != buf || !strstr(got, "unknown") ||
						       !strstr(got, hex)))
					FAIL("unknown %s bit 0x%x: named \"%s\"", word_names[w], 1u << b,
					     got);
			}
		}
	}
	/* supported bits beside an unsupported one: the unsupported is named,
	 * and an incompatible one before a compatible one */
	uint32_t words[3] = { 0x8 /* ext_attr */ | 0x400 /* fast_commit */, 0x1, 0x2 | 0x8000 /* inline_data */ };
	char buf[64];
	const char *got = chk_feature_missing(words, CHK_NEED_WRITTEN, buf, sizeof(buf));
	if (!got || strcmp(got, "inline_data"))
		FAIL("ext_attr, fast_commit, sparse_super, filetype, inline_data: named %s, want inline_data",
		     got ? got : "nothing");
	words[CHK_INCOMPAT] = 0x2;
	got = chk_feature_missing(words, CHK_NEED_WRITTEN, buf, sizeof(buf));
	if (!got || strcmp(got, "fast_commit"))
		FAIL("ext_attr, fast_commit, sparse_super, filetype: named %s, want fast_commit",
		     got ? got : "nothing");
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--list")) {
		size_t n;
		const struct chk_feature *t = chk_features(&n);
		for (size_t i = 0; i < n; i++)
			printf("%s 0x%x %s %d %d\n", word_names[t[i].word], t[i].mask, t[i].name,
			       t[i].written, t[i].modelled);
		return 0;
	}
	check_rows();
	check_bits();
	if (failures)
		printf("%d failure(s)\n", failures);
	else
		printf("feature table: every bit of the three words named as its row says\n");
	return failures ? 1 : 0;
}
