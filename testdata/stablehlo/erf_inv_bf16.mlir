"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{arg_attrs = [{}], function_type = (tensor<8x16xbf16>) -> tensor<8x8xbf16>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<8x16xbf16>):
    %0 = "stablehlo.tanh"(%arg0) : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
    %1 = "chlo.erf_inv"(%0) : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
    %2 = "stablehlo.transpose"(%arg0) <{permutation = array<i64: 1, 0>}> : (tensor<8x16xbf16>) -> tensor<16x8xbf16>
    %3 = "stablehlo.dot_general"(%1, %2) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<8x16xbf16>, tensor<16x8xbf16>) -> tensor<8x8xbf16>
    "func.return"(%3) : (tensor<8x8xbf16>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
