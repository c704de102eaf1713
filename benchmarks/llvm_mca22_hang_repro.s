	ds_read_b128 v[148:151], v89 offset:4608
	ds_read_b128 v[160:163], v89 offset:4672
	v_addc_co_u32_e32 v89, vcc, 0, v83, vcc
	v_add_co_u32_e32 v76, vcc, s19, v82
	v_mfma_f32_16x16x32_f16 v[38:41], v[148:151], v[144:147], v[38:41]
