// The one include of CBLAS (lapack.h adds LAPACKE). A build against
// scipy-openblas (the wheel's BLAS, from PyPI, as NumPy and SciPy use;
// KILN_BLAS_SCIPY) finds every symbol behind a "scipy_" prefix: the names kiln
// calls are mapped here, so the kernels keep the standard ones.
#pragma once

#if KILN_BLAS_SCIPY
#define KILN_SCIPY(name) scipy_##name
#define cblas_sgemm KILN_SCIPY(cblas_sgemm)
#define cblas_dgemm KILN_SCIPY(cblas_dgemm)
#define cblas_cgemm KILN_SCIPY(cblas_cgemm)
#define openblas_get_corename KILN_SCIPY(openblas_get_corename)
#define LAPACKE_sgetrf KILN_SCIPY(LAPACKE_sgetrf)
#define LAPACKE_dgetrf KILN_SCIPY(LAPACKE_dgetrf)
#define LAPACKE_sgetri KILN_SCIPY(LAPACKE_sgetri)
#define LAPACKE_dgetri KILN_SCIPY(LAPACKE_dgetri)
#define LAPACKE_sgesv KILN_SCIPY(LAPACKE_sgesv)
#define LAPACKE_dgesv KILN_SCIPY(LAPACKE_dgesv)
#define LAPACKE_strtri KILN_SCIPY(LAPACKE_strtri)
#define LAPACKE_dtrtri KILN_SCIPY(LAPACKE_dtrtri)
#define LAPACKE_spotrf KILN_SCIPY(LAPACKE_spotrf)
#define LAPACKE_dpotrf KILN_SCIPY(LAPACKE_dpotrf)
#define LAPACKE_ssyevd KILN_SCIPY(LAPACKE_ssyevd)
#define LAPACKE_dsyevd KILN_SCIPY(LAPACKE_dsyevd)
#define LAPACKE_sgeqrf KILN_SCIPY(LAPACKE_sgeqrf)
#define LAPACKE_dgeqrf KILN_SCIPY(LAPACKE_dgeqrf)
#define LAPACKE_sorgqr KILN_SCIPY(LAPACKE_sorgqr)
#define LAPACKE_dorgqr KILN_SCIPY(LAPACKE_dorgqr)
#define LAPACKE_sgesdd KILN_SCIPY(LAPACKE_sgesdd)
#define LAPACKE_dgesdd KILN_SCIPY(LAPACKE_dgesdd)
#define LAPACKE_sgeev KILN_SCIPY(LAPACKE_sgeev)
#define LAPACKE_dgeev KILN_SCIPY(LAPACKE_dgeev)
#define LAPACKE_cgesdd KILN_SCIPY(LAPACKE_cgesdd)
#define LAPACKE_cheevd KILN_SCIPY(LAPACKE_cheevd)
#define LAPACKE_cgeev KILN_SCIPY(LAPACKE_cgeev)
#endif

#include <cblas.h>
